import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DeadLetterList, type DeadLetterEntry } from '../../src/backends/memory/dead-letter-list.js';

const entry = (id: number, partition = id % 3, sequence = id): DeadLetterEntry => ({
  id,
  partition,
  sequence,
  attempt: 1,
  reason: null,
  deadLetteredAt: id,
});

describe('memory DeadLetterList', () => {
  it('pages, finds and counts like a plain sorted list through removals and compactions', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }),
        fc.array(fc.integer({ min: 1, max: 300 }), { maxLength: 300 }),
        fc.integer({ min: 0, max: 310 }),
        fc.integer({ min: 1, max: 50 }),
        (count, removals, after, limit) => {
          const list = new DeadLetterList();
          const model = new Map<number, DeadLetterEntry>();
          for (let id = 1; id <= count; id++) {
            list.add(entry(id));
            model.set(id, entry(id));
          }
          for (const id of removals) {
            const e = model.get(id);
            if (e) {
              list.remove(e);
              model.delete(id);
            } else list.remove(entry(id)); // removing what is not there changes nothing
          }
          const ids = [...model.keys()].sort((a, b) => a - b);
          expect(list.size).toBe(ids.length);
          expect(list.page(after, limit).map((e) => e.id)).toEqual(ids.filter((id) => id > after).slice(0, limit));
          const all = Array.from({ length: count }, (_, i) => i + 1);
          expect(all.filter((id) => list.has(id))).toEqual(ids);
          expect(all.filter((id) => list.find(id % 3, id)?.id === id)).toEqual(ids);
          expect(
            list
              .all()
              .map((e) => e.id)
              .sort((a, b) => a - b),
          ).toEqual(ids);
          for (let p = 0; p < 3; p++) {
            expect(
              list
                .inPartitionFrom(p, after)
                .map((e) => e.id)
                .sort((a, b) => a - b),
            ).toEqual(ids.filter((id) => id % 3 === p && id >= after));
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  it('pages every entry exactly once when walked with after = the last id of each page', () => {
    const list = new DeadLetterList();
    for (let id = 1; id <= 200; id++) list.add(entry(id));
    // Two of every three go: the list compacts its order on the way.
    for (let id = 1; id <= 200; id++) if (id % 3 !== 0) list.remove(entry(id));
    const walked: number[] = [];
    for (let after = 0; ; ) {
      const page = list.page(after, 7);
      if (page.length === 0) break;
      walked.push(...page.map((e) => e.id));
      after = page.at(-1)!.id;
    }
    expect(walked).toEqual(Array.from({ length: 66 }, (_, i) => 3 * (i + 1)));
  });

  it('clear forgets everything', () => {
    const list = new DeadLetterList();
    for (let id = 1; id <= 10; id++) list.add(entry(id));
    list.clear();
    expect([list.size, list.page(0, 10), list.find(1, 1), list.all(), list.has(1)]).toEqual([0, [], undefined, [], false]);
  });
});
