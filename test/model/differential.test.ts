import fc from 'fast-check';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createRheo } from '../../src/rheo.js';
import type { Backend as RheoBackend } from '../../src/core/backend.js';
import { backendFactories } from '../support/backends.js';
import { makeRedisTestBackend, redisTarget } from '../support/redis.js';
import { scenarioArb, type Depth } from './commands.js';
import { runScenario } from './differential.js';
import type { Backend } from './subject.js';

/*
 * Differential, model-based test: random scenarios run against the reference
 * model and every backend in `backendFactories` at once (see differential.ts).
 * `npm test` runs a fast slice; `npm run test:deep` (RHEO_MODEL_DEEP=1) runs
 * hundreds of long scenarios. A failure prints fast-check's seed and path;
 * replay exactly that case with RHEO_MODEL_SEED=<seed> RHEO_MODEL_PATH=<path>.
 * The deep run adds a Redis Cluster (redis-cluster) to memory, postgres and redis;
 * RHEO_MODEL_BACKENDS=memory,postgres picks backends; RHEO_MODEL_NO_SHRINK=1
 * reports the first failure unshrunk.
 */

const DEEP = process.env.RHEO_MODEL_DEEP === '1';

/**
 * Every backend of `backendFactories`, plus a three-master Redis Cluster in
 * the deep run: each partition's keys live on their own slot there, so a
 * fetch's scripts cross nodes (`npm test` leaves it to the conformance suite).
 */
const modelFactories: Array<{ name: string; make(clock: ManualClock): Promise<RheoBackend> }> = [
  ...backendFactories,
  ...(DEEP && process.env.RHEO_MEMORY_ONLY !== '1'
    ? [{ name: 'redis-cluster', make: async (clock: ManualClock) => makeRedisTestBackend(await redisTarget('cluster'), clock) }]
    : []),
];
const depth: Depth = DEEP
  ? { numRuns: Number(process.env.RHEO_MODEL_RUNS ?? 300), minCommands: 1, maxCommands: 400 }
  : { numRuns: Number(process.env.RHEO_MODEL_RUNS ?? 16), minCommands: 1, maxCommands: 100 };

/** The deep run's fresh seed, drawn here so that its summary line can name it. */
const SEED = process.env.RHEO_MODEL_SEED ?? (DEEP ? String((Math.random() * 2 ** 32) | 0) : undefined);

function replayParameters(): fc.Parameters<unknown> {
  const seed = SEED;
  const path = process.env.RHEO_MODEL_PATH;
  return {
    // npm test's fast slice runs one fixed seed so it is deterministic; the
    // deep run (RHEO_MODEL_DEEP=1) draws fresh seeds. Seed -766177232 (deep)
    // found Redis dead-lettering a spent delivery after a one-partition
    // fetch's last claim; fixed, with a conformance case in leases.ts.
    ...(seed === undefined ? (DEEP ? {} : { seed: 20261130 }) : { seed: Number(seed) }),
    ...(path === undefined ? {} : { path }),
    ...(process.env.RHEO_MODEL_NO_SHRINK === '1' ? { endOnFailure: true } : {}),
  };
}

describe('differential: every backend against the reference model', () => {
  // One clock for the model, every backend and every facade, so expiry and
  // delays fall at the same instant everywhere. Each scenario has a stream of
  // its own, so one backend per kind serves the whole file.
  const clock = new ManualClock();
  const backends: Backend[] = [];
  let scenarios = 0;
  let steps = 0;

  beforeAll(async () => {
    const only = process.env.RHEO_MODEL_BACKENDS?.split(',');
    for (const factory of modelFactories) {
      if (only && !only.includes(factory.name)) continue;
      const backend = await factory.make(clock);
      backends.push({ name: factory.name, rheo: createRheo({ backend, clock }) });
    }
  }, 120_000);

  afterAll(async () => {
    for (const b of backends) await b.rheo.close();
    // What the run covered, so a deep run can be reported (and its seed replayed).
    const names = backends.map((b) => b.name).join(', ');
    process.stderr.write(`differential: seed ${SEED ?? 'fast-check default'}, backends ${names}: ${scenarios} scenarios, ${steps} commands\n`);
  });

  it(
    `${depth.numRuns} random scenarios of ${depth.minCommands}-${depth.maxCommands} commands agree step by step`,
    async () => {
      await fc.assert(
        fc.asyncProperty(scenarioArb(depth), async (scenario) => {
          await runScenario(scenario, backends, clock, `model-${scenarios++}`);
          steps += scenario.commands.length;
        }),
        {
          numRuns: depth.numRuns,
          // Shrinking re-runs scenarios against PostgreSQL too and can outlast
          // the test's timeout, which would swallow the seed: fast-check stops
          // first and reports the smallest failing case found so far.
          ...(DEEP ? {} : { interruptAfterTimeLimit: 240_000 }),
          ...replayParameters(),
        },
      );
    },
    DEEP ? 6 * 3600_000 : 300_000,
  );
});
