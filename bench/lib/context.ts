import pg from 'pg';

import { max, median, min } from './stats.js';

/** `events`: a count of events (fewer is better), e.g. those handled twice. */
export type Unit = 'events/s' | 'jobs/s' | 'rows/s' | 'ms' | 'µs' | 'x' | 'MB' | '%' | 'events';

/** One measured quantity, with one sample per repetition. */
export interface Metric {
  scenario: string;
  name: string;
  unit: Unit;
  samples: number[];
  /** Higher is better for rates, lower for latencies. */
  better: 'higher' | 'lower';
  note?: string;
}

export interface MetricSummary extends Metric {
  median: number;
  min: number;
  max: number;
}

export interface PgAccess {
  /** Superuser URL of the maintenance database. */
  adminUrl: string;
  /** Server version string, e.g. "PostgreSQL 15.14". */
  version: string;
  /** Creates an empty database for one scenario and returns its URL. */
  createDatabase(name: string): Promise<string>;
  dropDatabase(name: string): Promise<void>;
}

export interface BenchOptions {
  quick: boolean;
  /** Repetitions for each measured case. */
  runs: number;
  only: Set<string> | null;
}

/**
 * What every scenario gets: sizes, the database (when there is one) and a
 * place to put samples. Scenarios never print results themselves.
 */
export class BenchContext {
  readonly metrics = new Map<string, Metric>();
  readonly skipped: Array<{ scenario: string; reason: string }> = [];
  readonly notes: string[] = [];

  constructor(
    readonly options: BenchOptions,
    readonly pg: PgAccess | null,
  ) {}

  get quick(): boolean {
    return this.options.quick;
  }

  get runs(): number {
    return this.options.runs;
  }

  /** Picks the full or the quick size. */
  size(full: number, quick: number): number {
    return this.options.quick ? quick : full;
  }

  record(scenario: string, name: string, unit: Unit, sample: number, note?: string): void {
    const key = `${scenario}\u0000${name}`;
    let metric = this.metrics.get(key);
    if (!metric) {
      metric = { scenario, name, unit, samples: [], better: unit === 'ms' || unit === 'µs' || unit === 'MB' || unit === '%' || unit === 'events' ? 'lower' : 'higher', note };
      this.metrics.set(key, metric);
    }
    metric.samples.push(sample);
  }

  skip(scenario: string, reason: string): void {
    this.skipped.push({ scenario, reason });
    log(`  skipped ${scenario}: ${reason}`);
  }

  get(scenario: string, name: string): MetricSummary | undefined {
    const metric = this.metrics.get(`${scenario}\u0000${name}`);
    return metric ? summarize(metric) : undefined;
  }

  summaries(): MetricSummary[] {
    return [...this.metrics.values()].map(summarize);
  }
}

export function summarize(metric: Metric): MetricSummary {
  return { ...metric, median: median(metric.samples), min: min(metric.samples), max: max(metric.samples) };
}

export function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** Database-per-scenario access on top of a superuser URL. */
export async function pgAccess(adminUrl: string): Promise<PgAccess> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  let version: string;
  try {
    const { rows } = await admin.query<{ v: string }>("select split_part(version(), ' on ', 1) as v");
    version = rows[0]?.v ?? 'unknown';
  } finally {
    await admin.end();
  }
  const withAdmin = async (sql: string): Promise<void> => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  const url = new URL(adminUrl);
  return {
    adminUrl,
    version,
    async createDatabase(name) {
      const ident = quoteIdent(name);
      await withAdmin(`drop database if exists ${ident} with (force)`);
      await withAdmin(`create database ${ident}`);
      const u = new URL(url.toString());
      u.pathname = `/${encodeURIComponent(name)}`;
      return u.toString();
    },
    async dropDatabase(name) {
      await withAdmin(`drop database if exists ${quoteIdent(name)} with (force)`);
    },
  };
}

export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
