import type { ScenarioSpec } from './scenario.js';

const common = {
  partitions: 4,
  concurrency: 8,
  leaseMs: 1000,
  handlerMs: 20,
  overlap: false,
  batch: 20,
  drainTimeoutMs: 60_000,
} satisfies Partial<ScenarioSpec>;

/**
 * The scenarios of `npm run chaos` (`scale` 1: about half a minute of
 * appends under fault each; smaller scales shorten them). The lease is short
 * so that the leases of a dead or paused worker come back within the run.
 */
export function chaosScenarios(scale = 1): ScenarioSpec[] {
  const events = (n: number): number => Math.max(100, Math.round(n * scale));
  const full = { ...common, workers: 3, appenders: 2, perSecond: 300 };
  return [
    { ...full, name: 'worker SIGKILL', fault: { kind: 'sigkill', everyMs: 2000 }, events: events(9000) },
    { ...full, name: 'worker SIGSTOP past lease', fault: { kind: 'sigstop', everyMs: 2000, pauseMs: 2500 }, handlerMs: 50, events: events(9000) },
    { ...full, name: 'connections terminated', fault: { kind: 'terminate', everyMs: 1000 }, events: events(9000) },
    { ...full, name: 'pg_ctl restart -m fast', fault: { kind: 'restart', mode: 'fast', everyMs: 5000 }, events: events(9000) },
    { ...full, name: 'pg_ctl restart -m immediate', fault: { kind: 'restart', mode: 'immediate', everyMs: 5000 }, events: events(9000) },
    {
      ...full,
      name: 'concurrent appenders',
      fault: { kind: 'none' },
      appenders: 4,
      overlap: true,
      events: events(6000),
      perSecond: 300,
    },
  ];
}

/**
 * The Redis scenarios of `npm run chaos` (after the PostgreSQL ones, in the
 * same table), on a redis-server with `appendonly yes` and `appendfsync
 * always`, so an acknowledged append survives the SIGKILL of the server.
 */
export function redisChaosScenarios(scale = 1): ScenarioSpec[] {
  const events = (n: number): number => Math.max(100, Math.round(n * scale));
  const full = { ...common, backend: 'redis' as const, workers: 3, appenders: 2, perSecond: 300 };
  return [
    { ...full, name: 'redis: worker SIGKILL', fault: { kind: 'sigkill', everyMs: 2000 }, events: events(9000) },
    { ...full, name: 'redis: worker SIGSTOP past lease', fault: { kind: 'sigstop', everyMs: 2000, pauseMs: 2500 }, handlerMs: 50, events: events(9000) },
    { ...full, name: 'redis: CLIENT KILL', fault: { kind: 'terminate', everyMs: 1000 }, events: events(9000) },
    { ...full, name: 'redis: SIGKILL redis-server, restart', fault: { kind: 'restart', mode: 'immediate', everyMs: 5000 }, events: events(9000) },
    // One partition: idle workers claim through the blocking fetch (an XREAD BLOCK with the claim behind it), whose connections die too.
    { ...full, partitions: 1, name: 'redis, 1 partition: worker SIGKILL', fault: { kind: 'sigkill', everyMs: 2000 }, events: events(9000) },
    { ...full, partitions: 1, name: 'redis, 1 partition: CLIENT KILL', fault: { kind: 'terminate', everyMs: 1000 }, events: events(9000) },
    { ...full, partitions: 1, name: 'redis, 1 partition: SIGKILL redis-server', fault: { kind: 'restart', mode: 'immediate', everyMs: 5000 }, events: events(9000) },
  ];
}

/**
 * The same scenarios (by default the PostgreSQL ones) for `npm test`: two workers, one appender (four where
 * appenders are the point), a few hundred events over about two seconds, and
 * one or two faults each. Child processes start slowly on a loaded machine
 * (seconds each), so fewer of them is what keeps this short. The paused
 * worker's handlers are slow enough (200 ms on average, more than its two
 * workers can keep up with) that it always holds leases when it is stopped.
 */
export function shortChaosScenarios(full: ScenarioSpec[] = chaosScenarios()): ScenarioSpec[] {
  return full.map((spec) => ({
    ...spec,
    handlerMs: spec.fault.kind === 'sigstop' ? 200 : spec.handlerMs,
    workers: 2,
    appenders: spec.overlap ? 3 : 1,
    events: 400,
    perSecond: 200,
    fault: spec.fault.kind === 'none' ? spec.fault : { ...spec.fault, everyMs: 1000 },
    drainTimeoutMs: 30_000,
  }));
}
