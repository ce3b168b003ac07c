import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of PostgreSQL that reads the wire protocol
 * (only message boundaries and query texts) so a test can lose the answer to
 * a chosen statement after the server ran it, or reset connections.
 *
 * Losing an answer: the request is forwarded, everything the server sends
 * from then on is discarded, and once the server's ReadyForQuery arrives
 * (the statement, a COMMIT say, has finished on the server) both sockets are
 * destroyed. The client sees its connection reset with the outcome unknown,
 * while the server did the work: what a pooler, a proxy or a network drop
 * can do to an answer in flight.
 */
export interface FaultProxy {
  readonly port: number;
  /** `postgres://...` of the target with host and port replaced by the proxy's. */
  url(targetUrl: string): string;
  /**
   * Loses the answer to the next `times` requests `match` selects. `match`
   * gets the query text and the texts sent since the connection's last
   * BEGIN (so a COMMIT can be told apart by what its transaction ran).
   */
  dropAnswer(match: RequestMatch, times?: number): void;
  /**
   * From now on, loses each request's answer with probability `answer`
   * (COMMITs with `commit`), and resets the connection before forwarding a
   * request with probability `reset`; `random` is the generator (seeded by
   * the caller for a reproducible run). `null` stops it.
   */
  chaos(rates: { answer: number; commit: number; reset: number; random: () => number } | null): void;
  /** Destroys every open connection now. */
  resetAll(): void;
  readonly stats: { connections: number; droppedAnswers: number; droppedCommits: number; resets: number };
  close(): Promise<void>;
}

export type RequestMatch = (query: string, transaction: readonly string[]) => boolean;

interface Rule {
  match: RequestMatch;
  left: number;
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  const rules: Rule[] = [];
  const sockets = new Set<Socket>();
  const stats = { connections: 0, droppedAnswers: 0, droppedCommits: 0, resets: 0 };
  let chaos: { answer: number; commit: number; reset: number; random: () => number } | null = null;

  const server: Server = createServer((client) => {
    stats.connections++;
    const upstream = connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    client.setNoDelay(true);
    upstream.setNoDelay(true);

    // Client to server: the first message (startup, or an SSL/GSS request
    // answered with one byte) has no type byte; the rest do.
    let fromClient = Buffer.alloc(0);
    let untyped = true;
    let transaction: string[] = [];
    const statements = { texts: new Map<string, string>(), parsed: false };
    /** Set once a request's answer is to be lost: discard server bytes until ReadyForQuery, then reset. */
    let losing = false;
    let awaitingOneByte = false;

    client.on('data', (chunk: Buffer) => {
      fromClient = Buffer.concat([fromClient, chunk]);
      for (;;) {
        if (closed) return;
        const header = untyped ? 4 : 5;
        if (fromClient.length < header) return;
        const length = untyped ? fromClient.readInt32BE(0) : fromClient.readInt32BE(1) + 1;
        if (fromClient.length < length) return;
        const message = fromClient.subarray(0, length);
        fromClient = fromClient.subarray(length);
        if (untyped) {
          const code = message.readInt32BE(4);
          // SSLRequest / GSSENCRequest: one byte comes back, then a startup message follows.
          if (code === 80877103 || code === 80877104) awaitingOneByte = true;
          else untyped = false;
          upstream.write(message);
          continue;
        }
        const query = queryOf(message, statements);
        if (query !== null) {
          if (/^\s*(BEGIN|START)/i.test(query)) transaction = [];
          const isCommit = /^\s*COMMIT/i.test(query);
          if (chaos && chaos.random() < chaos.reset) {
            stats.resets++;
            close();
            return;
          }
          let lose = false;
          const rule = rules.find((r) => r.left > 0 && r.match(query, transaction));
          if (rule) {
            rule.left--;
            lose = true;
          } else if (chaos && chaos.random() < (isCommit ? chaos.commit : chaos.answer)) {
            lose = true;
          }
          transaction.push(query);
          if (lose && !losing) {
            losing = true;
            stats.droppedAnswers++;
            if (isCommit) stats.droppedCommits++;
          }
        }
        upstream.write(message);
      }
    });

    // Server to client: forward whole messages, watching for ReadyForQuery.
    let fromServer = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      fromServer = Buffer.concat([fromServer, chunk]);
      if (awaitingOneByte && fromServer.length > 0) {
        awaitingOneByte = false;
        client.write(fromServer.subarray(0, 1));
        fromServer = fromServer.subarray(1);
      }
      let forward = 0;
      while (fromServer.length - forward >= 5) {
        const length = fromServer.readInt32BE(forward + 1) + 1;
        if (fromServer.length - forward < length) break;
        const type = fromServer[forward];
        forward += length;
        if (losing && type === 0x5a /* Z */) {
          // The statement has finished on the server; its answer never arrives.
          close();
          return;
        }
      }
      if (!losing) client.write(fromServer.subarray(0, forward));
      fromServer = fromServer.subarray(forward);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  return {
    port,
    url(targetUrl) {
      const url = new URL(targetUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      return url.toString();
    },
    dropAnswer(match, times = 1) {
      rules.push({ match, left: times });
    },
    chaos(rates) {
      chaos = rates;
    },
    resetAll() {
      for (const socket of [...sockets]) socket.destroy();
      stats.resets++;
    },
    stats,
    async close() {
      for (const socket of [...sockets]) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The query text of a Query ('Q') or Parse ('P') message, or of a Bind
 * ('B') of a named statement parsed by an earlier request on this
 * connection; `null` for every other message (Describe, Execute, Sync, ...).
 */
function queryOf(message: Buffer, statements: { texts: Map<string, string>; parsed: boolean }): string | null {
  const type = message[0];
  if (type === 0x51 /* Q */) return cstring(message, 5).text;
  if (type === 0x53 /* S: Sync ends an extended-protocol request */) statements.parsed = false;
  if (type === 0x50 /* P */) {
    const name = cstring(message, 5);
    const text = cstring(message, name.end).text;
    if (name.text !== '') statements.texts.set(name.text, text);
    statements.parsed = true;
    return text;
  }
  // A Bind after a Parse in the same request belongs to the request already counted.
  if (type === 0x42 /* B */ && !statements.parsed) {
    const portal = cstring(message, 5);
    const name = cstring(message, portal.end).text;
    return name === '' ? null : (statements.texts.get(name) ?? null);
  }
  return null;
}

function cstring(buffer: Buffer, start: number): { text: string; end: number } {
  const zero = buffer.indexOf(0, start);
  const end = zero === -1 ? buffer.length : zero;
  return { text: buffer.toString('utf8', start, end), end: end + 1 };
}
