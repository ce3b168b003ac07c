import { describe, expect, it } from 'vitest';
import { check, type CheckInput } from './checker.js';
import type { ChaosRecord } from './records.js';

// The checker decides whether a chaos run passed; these cases prove that each
// violation it is meant to catch is caught, and that at-least-once redelivery is not.

const appended = (id: string, p: number, s: number): ChaosRecord => ({ k: 'appended', id, p, s });
const claim = (id: string, lease: string, attempt: number, t: number): ChaosRecord => ({ k: 'claim', id, lease, attempt, t });
const handled = (id: string, lease: string, attempt: number): ChaosRecord => ({ k: 'handled', id, lease, attempt });
const settle = (op: string, id: string, lease: string, ok: boolean, t: number): ChaosRecord => ({
  k: 'settle',
  op,
  id,
  lease,
  ok,
  code: ok ? null : 'stale_lease',
  t,
});

function input(workers: ChaosRecord[], extra: Partial<CheckInput> = {}): CheckInput {
  return {
    appended: [appended('a', 0, 1), appended('b', 0, 2)],
    workers,
    log: [{ partition: 0, events: [{ id: 'a', sequence: 1 }, { id: 'b', sequence: 2 }] }],
    deadLetterIds: [],
    ...extra,
  };
}

describe('chaos checker', () => {
  it('a clean run: every event handled once, nothing to report', () => {
    const r = check(input([claim('a', 'L1', 1, 10), handled('a', 'L1', 1), settle('ack', 'a', 'L1', true, 20), claim('b', 'L2', 1, 10), handled('b', 'L2', 1), settle('ack', 'b', 'L2', true, 20)]));
    expect(r).toMatchObject({ events: 2, lost: 0, duplicates: 0, staleAccepted: 0, staleRefused: 0, gaps: 0, logErrors: 0, reclaims: 0 });
  });

  it('an acknowledged event nobody handled and nobody dead-lettered is lost; a dead letter is not', () => {
    expect(check(input([handled('a', 'L1', 1)])).lost).toBe(1);
    expect(check(input([handled('a', 'L1', 1)], { deadLetterIds: ['b'] })).lost).toBe(0);
  });

  it('a redelivery is a duplicate, and the paused holder\'s refused ack is counted as refused, not accepted', () => {
    const r = check(
      input([
        claim('a', 'L1', 1, 10),
        claim('a', 'L2', 2, 2000),
        handled('a', 'L2', 2),
        settle('ack', 'a', 'L2', true, 2010),
        handled('a', 'L1', 1),
        settle('ack', 'a', 'L1', false, 3000),
        handled('b', 'L3', 1),
      ]),
    );
    expect(r).toMatchObject({ duplicates: 1, staleAccepted: 0, staleRefused: 1, reclaims: 1 });
  });

  it('an ack accepted for a lease that was claimed again is a stale settle accepted, whatever the order in the records', () => {
    const workers = [claim('a', 'L1', 1, 10), claim('a', 'L2', 2, 2000), settle('ack', 'a', 'L1', true, 3000), handled('a', 'L1', 1), handled('b', 'L3', 1)];
    expect(check(input(workers)).staleAccepted).toBe(1);
    expect(check(input([...workers].reverse())).staleAccepted).toBe(1);
  });

  it('a nack before the next claim is fine; a nack sent after another worker had claimed the event is stale', () => {
    const base = [claim('a', 'L1', 1, 10), claim('a', 'L2', 2, 500), handled('a', 'L2', 2), handled('b', 'L3', 1)];
    expect(check(input([...base, settle('nack', 'a', 'L1', true, 400)])).staleAccepted).toBe(0);
    expect(check(input([...base, settle('nack', 'a', 'L1', true, 600)])).staleAccepted).toBe(1);
  });

  it('after a release the next claim has the same attempt: ordered by the claim time, so acking it is fine', () => {
    const r = check(input([claim('a', 'L1', 1, 10), settle('release', 'a', 'L1', true, 20), claim('a', 'L2', 1, 30), handled('a', 'L2', 1), settle('ack', 'a', 'L2', true, 40), handled('b', 'L3', 1)]));
    expect(r.staleAccepted).toBe(0);
  });

  it('sequence gaps, ids stored twice and events stored elsewhere than acknowledged are reported', () => {
    const log = [{ partition: 0, events: [{ id: 'a', sequence: 1 }, { id: 'b', sequence: 3 }, { id: 'a', sequence: 4 }] }];
    const r = check(input([handled('a', 'L1', 1), handled('b', 'L2', 1)], { log }));
    expect(r.gaps).toBe(1);
    expect(r.logErrors).toBe(2); // 'a' twice, and 'b' acknowledged at 0:2 but stored at 0:3
  });
});
