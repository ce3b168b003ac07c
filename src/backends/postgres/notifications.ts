import type pg from 'pg';
import { log, silentLogger, type Logger } from '../../core/logger.js';
import { StreamWaiters } from '../../core/stream-waiters.js';

const RECONNECT_MIN_MS = 50;
const RECONNECT_MAX_MS = 5_000;

/**
 * One dedicated LISTEN connection per backend, opened on the first
 * waitForAppend and reopened after a drop (with backoff) until close(). A
 * notification wakes the waiters of its stream; appends made through this
 * backend wake them directly too. Losing a notification only costs latency
 * because callers keep polling, so on every reconnect all waiters are woken
 * (a notification may have been missed while the connection was down).
 */
export class AppendListener {
  /** `null`: no LISTEN connection at all (behind a transaction-mode pooler with no direct address); waiters poll. */
  readonly #connect: (() => pg.Client) | null;
  #warnedNoListen = false;
  readonly #listenSql: string;
  readonly #waiters = new StreamWaiters();
  #client: pg.Client | null = null;
  #connecting: Promise<void> | null = null;
  #retryTimer: NodeJS.Timeout | null = null;
  #retryMs = RECONNECT_MIN_MS;
  #everConnected = false;
  #closed = false;
  #logger: Logger = silentLogger;
  #schema = '';
  /** Consecutive failed attempts since the connection was last up, for the log. */
  #failures = 0;

  constructor(connect: (() => pg.Client) | null, quotedChannel: string) {
    this.#connect = connect;
    this.#listenSql = `LISTEN ${quotedChannel}`;
  }

  useLogger(logger: Logger, schema: string): void {
    this.#logger = logger;
    this.#schema = schema;
  }

  /** True while a LISTEN connection is up (introspection for tests and health checks). */
  get listening(): boolean {
    return this.#client !== null;
  }

  wait(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#closed || signal?.aborted) return Promise.resolve(false);
    this.#ensureConnected();
    return this.#waiters.wait(stream, timeoutMs, signal);
  }

  /** Wakes the waiters of one stream (a notification, or a local append). */
  wake(stream: string): void {
    this.#waiters.wake(stream);
  }

  /** Resolves once LISTEN is active (used by tests; waitForAppend never needs it). */
  async ready(): Promise<void> {
    if (this.#connect === null) return this.#warnNoListen();
    this.#ensureConnected();
    while (!this.#closed && this.#client === null) {
      await (this.#connecting ?? new Promise((resolve) => setTimeout(resolve, RECONNECT_MIN_MS)));
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    this.#waiters.close();
    await this.#connecting?.catch(() => {});
    const client = this.#client;
    this.#client = null;
    if (client) await client.end().catch(() => {});
  }

  #ensureConnected(): void {
    if (this.#connect === null) return this.#warnNoListen();
    if (this.#closed || this.#client !== null || this.#connecting !== null || this.#retryTimer !== null) return;
    this.#connecting = this.#open().finally(() => {
      this.#connecting = null;
    });
  }

  /**
   * Once per backend: a LISTEN through a transaction-mode pooler would sit on
   * a server connection the pooler hands to others after the statement, and
   * its notifications would be lost, so there is none.
   */
  #warnNoListen(): void {
    if (this.#warnedNoListen) return;
    this.#warnedNoListen = true;
    log(
      this.#logger,
      'warn',
      { schema: this.#schema },
      `rheo backend for schema "${this.#schema}" is behind a transaction-mode pooler and has no listenConnectionString: no LISTEN connection, so consumers in other processes find new events by polling (pollMs); give listenConnectionString (a direct connection) to be woken at once`,
    );
  }

  async #open(): Promise<void> {
    const client = this.#connect!();
    let dropped = false;
    const onDrop = (error?: unknown) => {
      if (dropped) return;
      dropped = true;
      const wasUp = this.#client === client;
      if (wasUp) this.#client = null;
      if (!this.#closed) {
        this.#failures++;
        log(this.#logger, 'warn', {
          schema: this.#schema,
          err: error instanceof Error ? error : undefined,
          failures: this.#failures,
          retryInMs: this.#retryMs,
        }, wasUp
          ? `rheo LISTEN connection for schema "${this.#schema}" dropped; reconnecting (appends are still found by polling)`
          : `rheo LISTEN connection for schema "${this.#schema}" could not be opened; retrying`);
      }
      client.end().catch(() => {});
      this.#scheduleReconnect();
    };
    client.on('error', onDrop);
    client.on('end', onDrop);
    client.on('notification', (message) => {
      if (message.payload !== undefined) this.wake(message.payload);
    });
    try {
      await client.connect();
      await client.query(this.#listenSql);
    } catch (error) {
      onDrop(error);
      return;
    }
    if (dropped) return;
    if (this.#closed) {
      await client.end().catch(() => {});
      return;
    }
    this.#client = client;
    this.#retryMs = RECONNECT_MIN_MS;
    if (this.#everConnected || this.#failures > 0) {
      log(this.#logger, 'info', { schema: this.#schema, failures: this.#failures }, `rheo LISTEN connection for schema "${this.#schema}" reconnected`);
    }
    this.#failures = 0;
    if (this.#everConnected) this.#waiters.wakeAll();
    this.#everConnected = true;
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#retryTimer !== null) return;
    const delay = this.#retryMs;
    this.#retryMs = Math.min(this.#retryMs * 2, RECONNECT_MAX_MS);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      this.#ensureConnected();
    }, delay);
    this.#retryTimer.unref();
  }
}
