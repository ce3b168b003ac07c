import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { RheoError, invalidArgument, isRheoError, type RheoErrorCode } from '../core/errors.js';
import type { GroupInfo, ReplaySpec } from '../core/types.js';
import type { Rheo } from '../rheo.js';

export interface DashboardOptions {
  /**
   * Path the dashboard is served under when the handler sees full URLs (a
   * plain `node:http` server). Leave it at `/` when a framework strips its
   * mount path (Express `app.use('/rheo', handler)`). Default `/`.
   */
  basePath?: string;
  /** Show and accept redrive and replay. Default `false`: read-only, writes answer 403 `permission_denied`. */
  allowWrites?: boolean;
  /**
   * Called for every request before anything is read; answer `false` to
   * refuse it (403 `permission_denied`). `write` is true for redrive and
   * replay. Use it for the application's own session check when embedded.
   */
  authorize?(request: IncomingMessage, access: { write: boolean }): boolean | Promise<boolean>;
  /** Largest JSON body a write accepts, in bytes. Default 65536. */
  maxBodyBytes?: number;
}

/** A `node:http` request listener; `next` (Express, Connect) is called for paths outside `basePath`. */
export type DashboardHandler = (request: IncomingMessage, response: ServerResponse, next?: (error?: unknown) => void) => void;

/** Browsers never send this header across origins without a CORS preflight, which the dashboard never grants. */
export const DASHBOARD_WRITE_HEADER = 'x-rheo-dashboard';

const STATIC: Record<string, string> = {
  '/': 'index.html',
  '/index.html': 'index.html',
  '/dashboard.js': 'dashboard.js',
  '/dashboard.css': 'dashboard.css',
};

const CONTENT_TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

/**
 * The static files: `assets/` next to this module in the source tree,
 * `dashboard/` next to the bundle in the package (tsup.config.ts copies them).
 */
function assetsDir(): string {
  for (const candidate of ['./assets/', './dashboard/']) {
    const dir = fileURLToPath(new URL(candidate, import.meta.url));
    if (existsSync(`${dir}index.html`)) return dir;
  }
  throw new RheoError('internal', 'the dashboard files are missing from this installation of rheo');
}

/**
 * The dashboard as a request handler: the page, its script and styles, and a
 * small JSON API over `rheo` (streams and groups, lag per partition with
 * ages, leases held, dead letters with payloads; redrive and replay only with
 * `allowWrites`). Bad input answers 400 with the `RheoError` code, as the
 * facade would throw it; nothing a request carries can crash the host.
 */
export function createDashboardHandler(rheo: Rheo, options: DashboardOptions = {}): DashboardHandler {
  if (options === null || typeof options !== 'object') throw invalidArgument('createDashboardHandler options must be an object');
  const basePath = normalizeBase(options.basePath ?? '/');
  const allowWrites = options.allowWrites === true;
  if (options.authorize !== undefined && typeof options.authorize !== 'function') {
    throw invalidArgument('authorize must be a function (request, { write }) => boolean | Promise<boolean>');
  }
  const maxBodyBytes = options.maxBodyBytes ?? 65_536;
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 2) throw invalidArgument('maxBodyBytes must be an integer of at least 2');
  const dir = assetsDir();
  const files = new Map<string, Promise<Buffer>>();
  const asset = (name: string): Promise<Buffer> => {
    let file = files.get(name);
    if (!file) {
      file = readFile(`${dir}${name}`);
      files.set(name, file);
    }
    return file;
  };

  const api = new DashboardApi(rheo, allowWrites, maxBodyBytes);

  return (request, response, next) => {
    void serve(request, response, next).catch((error: unknown) => {
      // A failure of the response itself (the socket went away): nothing left to answer.
      if (!response.headersSent) sendError(response, error);
      else response.destroy();
    });
  };

  async function serve(request: IncomingMessage, response: ServerResponse, next?: (error?: unknown) => void): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://dashboard.invalid');
    const original = new URL((request as { originalUrl?: string }).originalUrl ?? request.url ?? '/', 'http://dashboard.invalid');
    let path: string;
    if (url.pathname === basePath.slice(0, -1) || url.pathname.startsWith(basePath)) {
      path = `/${url.pathname.slice(basePath.length)}`;
    } else {
      if (next) return next();
      return sendError(response, new RheoError('invalid_argument', `no dashboard page at ${url.pathname}`), 404);
    }
    const write = request.method === 'POST';
    if (options.authorize && !(await options.authorize(request, { write }))) {
      return sendError(response, new RheoError('permission_denied', 'not authorised to use the rheo dashboard'));
    }
    // `/rheo` → `/rheo/`: the page loads its files and API relative to its own URL.
    if (path === '/' && !original.pathname.endsWith('/')) {
      response.writeHead(308, { location: `${original.pathname}/${original.search}` }).end();
      return;
    }
    const file = STATIC[path];
    if (file !== undefined) {
      if (request.method !== 'GET' && request.method !== 'HEAD') return sendError(response, invalidArgument(`${request.method} is not allowed on ${path}`), 405);
      const body = await asset(file);
      response.writeHead(200, {
        'content-type': CONTENT_TYPES[file.slice(file.lastIndexOf('.') + 1)] ?? 'application/octet-stream',
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff',
        'content-security-policy': "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
      });
      response.end(request.method === 'HEAD' ? undefined : body);
      return;
    }
    if (path.startsWith('/api/')) {
      const body = await api.handle(request, path.slice('/api/'.length), url.searchParams);
      sendJson(response, 200, body);
      return;
    }
    if (next) return next();
    sendError(response, new RheoError('invalid_argument', `no dashboard page at ${url.pathname}`), 404);
  }
}

/** The JSON API. Every answer is plain JSON; every failure a RheoError with its code. */
class DashboardApi {
  readonly #rheo: Rheo;
  readonly #allowWrites: boolean;
  readonly #maxBodyBytes: number;

  constructor(rheo: Rheo, allowWrites: boolean, maxBodyBytes: number) {
    this.#rheo = rheo;
    this.#allowWrites = allowWrites;
    this.#maxBodyBytes = maxBodyBytes;
  }

  async handle(request: IncomingMessage, route: string, query: URLSearchParams): Promise<unknown> {
    const method = request.method ?? 'GET';
    if (route === 'redrive' || route === 'replay') {
      if (method !== 'POST') throw new MethodError(method, route);
      if (!this.#allowWrites) {
        throw new RheoError('permission_denied', `the dashboard is read-only: start it with --allow-writes (allowWrites: true) to ${route}`);
      }
      if (request.headers[DASHBOARD_WRITE_HEADER] !== '1' || !String(request.headers['content-type'] ?? '').startsWith('application/json')) {
        throw new RheoError('permission_denied', `writes need "content-type: application/json" and "${DASHBOARD_WRITE_HEADER}: 1"`);
      }
      const body = await readJson(request, this.#maxBodyBytes);
      return route === 'redrive' ? this.#redrive(body) : this.#replay(body);
    }
    if (method !== 'GET' && method !== 'HEAD') throw new MethodError(method, route);
    switch (route) {
      case 'overview':
        return this.#overview();
      case 'group':
        return this.#group(required(query, 'stream'), required(query, 'group'));
      case 'dead-letters':
        return this.#deadLetters(query);
      default:
        throw new NotFound(`no dashboard API "${route}"`);
    }
  }

  async #overview(): Promise<unknown> {
    const rheo = this.#rheo;
    const streams = await rheo.listStreams();
    return {
      backend: rheo.backend.name,
      allowWrites: this.#allowWrites,
      now: new Date(rheo.clock.now()).toISOString(),
      streams: await Promise.all(
        streams.map(async (s) => {
          const groups = await rheo.listGroups(s.name);
          const infos = await Promise.all(groups.map((g) => rheo.groupInfo(s.name, g)));
          return {
            name: s.name,
            partitions: s.partitions,
            groups: infos.map((info) => ({ name: info.group, lag: info.lag.lag, leasesHeld: info.inflight, deadLetters: info.deadLetters })),
          };
        }),
      ),
    };
  }

  async #group(stream: string, group: string): Promise<unknown> {
    const info: GroupInfo = await this.#rheo.groupInfo(stream, group);
    const now = this.#rheo.clock.now();
    return {
      stream,
      group,
      now: new Date(now).toISOString(),
      maxAttempts: info.maxAttempts,
      lag: info.lag.lag,
      leasesHeld: info.inflight,
      deadLetters: info.deadLetters,
      partitions: Object.entries(info.lag.partitions).map(([partition, p]) => ({
        partition: Number(partition),
        frontier: p.frontier,
        highWatermark: p.highWatermark,
        lag: p.lag,
        oldestUnsettledAt: p.oldestUnsettledAt?.toISOString() ?? null,
        ageMs: p.oldestUnsettledAt === null ? 0 : Math.max(0, now - p.oldestUnsettledAt.getTime()),
      })),
    };
  }

  async #deadLetters(query: URLSearchParams): Promise<unknown> {
    const stream = required(query, 'stream');
    const group = required(query, 'group');
    const limitText = query.get('limit');
    const limit = limitText === null ? 50 : integerParam('limit', limitText);
    const after = query.get('after') ?? undefined;
    const letters = await this.#rheo.deadLetters(stream, group, { limit, after, maxBytes: 4 * 1024 * 1024 });
    return {
      stream,
      group,
      deadLetters: letters.map((d) => ({
        id: d.id,
        attempt: d.attempt,
        reason: d.reason,
        deadLetteredAt: d.deadLetteredAt.toISOString(),
        event: { ...d.event, timestamp: d.event.timestamp.toISOString() },
      })),
    };
  }

  async #redrive(body: Record<string, unknown>): Promise<unknown> {
    const stream = body.stream as string;
    const group = body.group as string;
    const redriven = await this.#rheo.redrive(stream, group, body.eventIds === undefined ? {} : { eventIds: body.eventIds as string[] });
    return { stream, group, redriven };
  }

  async #replay(body: Record<string, unknown>): Promise<unknown> {
    const stream = body.stream as string;
    const group = body.group as string;
    let spec: ReplaySpec;
    if (body.fromSequence !== undefined) spec = { fromSequence: body.fromSequence as number };
    else if (body.from !== undefined) {
      const from = typeof body.from === 'string' ? new Date(body.from) : new Date(Number.NaN);
      if (Number.isNaN(from.getTime())) throw invalidArgument('replay "from" must be an ISO 8601 date string');
      spec = { from };
    } else if (body.eventIds !== undefined) spec = { eventIds: body.eventIds as string[] };
    else throw invalidArgument('replay needs fromSequence, from or eventIds');
    await this.#rheo.replay(stream, group, spec, body.partitions === undefined ? {} : { partitions: body.partitions as number[] });
    return { stream, group, replayed: true };
  }
}

class NotFound extends RheoError {
  constructor(message: string) {
    super('invalid_argument', message);
  }
}

class MethodError extends RheoError {
  constructor(method: string, route: string) {
    super('invalid_argument', `${method} is not allowed on /api/${route}`);
  }
}

function required(query: URLSearchParams, name: string): string {
  const value = query.get(name);
  if (value === null || value === '') throw invalidArgument(`query parameter "${name}" is required`);
  return value;
}

function integerParam(name: string, text: string): number {
  if (!/^\d{1,9}$/.test(text)) throw invalidArgument(`query parameter "${name}" must be a positive integer, got "${text.slice(0, 40)}"`);
  return Number(text);
}

async function readJson(request: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw invalidArgument(`request body over ${maxBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw invalidArgument('request body is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidArgument('request body must be a JSON object');
  return value as Record<string, unknown>;
}

const STATUS: Partial<Record<RheoErrorCode, number>> = {
  invalid_argument: 400,
  invalid_partition: 400,
  cursor_not_found: 400,
  confirm_required: 400,
  event_too_large: 400,
  stream_not_found: 404,
  group_not_found: 404,
  permission_denied: 403,
  backend_unavailable: 503,
  closed: 503,
  unsupported: 501,
};

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  response.end(text);
}

function sendError(response: ServerResponse, error: unknown, status?: number): void {
  const failure = isRheoError(error)
    ? error
    : new RheoError('internal', `dashboard request failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
  const code = status ?? (error instanceof NotFound ? 404 : error instanceof MethodError ? 405 : (STATUS[failure.code] ?? 500));
  sendJson(response, code, { error: { code: failure.code, message: failure.message } });
}

function normalizeBase(base: string): string {
  if (typeof base !== 'string' || !base.startsWith('/') || /[?#\s]/.test(base)) {
    throw invalidArgument(`basePath must be a path starting with "/", got ${JSON.stringify(base)}`);
  }
  return base.endsWith('/') ? base : `${base}/`;
}
