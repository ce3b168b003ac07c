import { describe, expect, it } from 'vitest';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { run as runBroadway } from '../../examples/broadway-pipeline.js';
import { run as runConsumerGroups } from '../../examples/consumer-groups.js';
import { run as runFailureMapping } from '../../examples/failure-mapping.js';
import { run as runFlowStages } from '../../examples/flow-stages.js';
import { run as runPlainConsumer } from '../../examples/plain-consumer.js';
import { run as runRiskPipeline } from '../../examples/risk-pipeline.js';
import { run as runConsumeModes } from '../../examples/consume-modes.js';
import { run as runCompetingConsumers } from '../../examples/competing-consumers.js';
import { run as runReplayFromPoint } from '../../examples/replay-from-point.js';
import { run as runResume } from '../../examples/resume.js';
import { examples } from '../../examples/registry.js';
import { backendFactories } from '../support/backends.js';

for (const factory of backendFactories) {
  describe(`examples (${factory.name})`, () => {
    async function withRheo<R>(body: (rheo: Rheo) => Promise<R>): Promise<R> {
      // Real time here: the examples run as users run them (pollMs 50, real timers).
      const rheo = createRheo({ backend: await factory.make(), defaults: { pollMs: 50 } });
      return body(rheo);
    }
    const lines: string[] = [];
    const log = (line: string): void => {
      lines.push(line);
    };

    it('consumer groups: a nacked lease returns with attempt 2, both groups reach lag 0 independently', async () => {
      const result = await withRheo((rheo) => runConsumerGroups(rheo, log));
      expect(result.appended).toBe(6);
      expect(result.retriedAttempts).toEqual([2]);
      expect(result.billingLag).toBe(0);
      expect(result.shippingLeased).toBe(6);
      expect(result.shippingLag).toBe(0);
    });

    it('plain consumer: four leases, acked and confirmed', async () => {
      const result = await withRheo((rheo) => runPlainConsumer(rheo, log));
      expect(result.received).toBe(4);
      expect(result.tickNumbers).toHaveLength(4);
      expect(result.inflightBeforeConfirm).toBe(4);
      expect(result.inflightAfterConfirm).toBe(0);
    });

    it('flow stages: map in order, reduce every 3 emits 3, window every 2 over 4 emits [2, 2]', async () => {
      const result = await withRheo((rheo) => runFlowStages(rheo, log));
      expect(result.mapped.map(([n]) => n)).toEqual([1, 2, 3, 4]);
      expect(result.reduceBatchSize).toBe(3);
      expect(result.windowBatches).toEqual([2, 2]);
    });

    it('broadway pipeline: every event processed once, frontiers at the high watermarks, lag zero', async () => {
      const result = await withRheo((rheo) => runBroadway(rheo, log));
      expect(result.processed).toBe(12);
      expect(result.batchSizes.reduce((a, b) => a + b, 0)).toBe(12);
      expect(Math.max(...result.batchSizes)).toBeLessThanOrEqual(5);
      expect(result.frontiers[0]! + result.frontiers[1]!).toBe(12);
      expect(result.lag).toBe(0);
      expect(result.sample.every((row) => row.attempt === 1)).toBe(true);
    });

    it('failure mapping: retry then succeed, throw then succeed, reject to dead letters', async () => {
      const result = await withRheo((rheo) => runFailureMapping(rheo, log));
      expect(result.attempts).toEqual({ ok: 1, flaky: 2, crashy: 2, poison: 1 });
      expect(result.deadLetters).toEqual([{ job: 'poison', reason: 'payload cannot be parsed' }]);
      expect(result.lag).toBe(0);
      expect(result.batch).toEqual({ deadLetters: ['c'], retriedThenAcked: 1, lag: 0 });
    });

    it('risk pipeline: processors, failures by policy, two batchers through the router; every trade settled once, lag zero', async () => {
      const result = await withRheo((rheo) => runRiskPipeline(rheo, log));
      const unscorable = [40, 80, 120, 160, 200, 240];
      expect(result.deadLettered.map((d) => d.trade)).toEqual(unscorable);
      expect(result.deadLettered.every((d) => /negative notional cannot be scored/.test(d.reason ?? ''))).toBe(true);
      expect(result.warehoused + result.audited + result.deadLettered.length).toBe(result.events);
      expect(result.audited).toBeGreaterThan(0);
      // Every seventh trade bound for the warehouse was retried once, then acked at attempt 2.
      expect(result.retried).toBeGreaterThan(0);
      expect(result.largestWarehouseBatch).toBeLessThanOrEqual(50); // maxDemand 50: a batch of 100 never fills
      expect(Object.values(result.frontiers).reduce((a, b) => a + b, 0)).toBe(result.events);
      expect(result.lag).toBe(0);
    });

    it('consume modes: both groups handle every event; partition ownership in sequence order', async () => {
      const result = await withRheo((rheo) => runConsumeModes(rheo, log));
      expect(result).toEqual({
        events: 30,
        competingHandled: 30,
        partitionHandled: 30,
        partitionsInOrder: true,
        competingLag: 0,
        partitionLag: 0,
      });
    });

    it('competing consumers: two consumers of one group do disjoint work that covers the stream', async () => {
      const result = await withRheo((rheo) => runCompetingConsumers(rheo, log));
      expect(result.overlap).toBe(0);
      expect(result.covered).toBe(40);
      expect(result.perConsumer['worker-a']! + result.perConsumer['worker-b']!).toBe(40);
      expect(result.lag).toBe(0);
    });

    it('replay from a point: startAfter reads 7..10; a replay from 8 redelivers 8..10 at attempt 1', async () => {
      const result = await withRheo((rheo) => runReplayFromPoint(rheo, log));
      expect(result).toEqual({
        firstRead: [7, 8, 9, 10],
        frontierAfterFirst: 10,
        replayed: [
          [8, 1],
          [9, 1],
          [10, 1],
        ],
        frontierAfterReplay: 7,
        lag: 0,
      });
    });

    it('resume: the second run on one store picks up the three events the first left', async () => {
      await withRheo(async (rheo) => {
        expect(await runResume(rheo, log)).toEqual({ run: 1, resumed: [], left: 3 });
        expect(await runResume(rheo, log)).toEqual({ run: 2, resumed: ['1/4', '1/5', '1/6'], left: 3 });
      });
    });

    it('the runner knows every example', () => {
      expect(examples.map((e) => e.name)).toEqual([
        'consumer-groups',
        'plain-consumer',
        'flow-stages',
        'broadway-pipeline',
        'failure-mapping',
        'risk-pipeline',
        'consume-modes',
        'competing-consumers',
        'replay-from-point',
        'resume',
      ]);
    });
  });
}
