import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createRheo } from '../../src/rheo.js';
import { FaultLoop } from '../support/fault-loop.js';
import { databaseUrl, makeTestBackend } from '../support/postgres.js';

/** ReadyForQuery ('Z', length 5, status idle): the end of a connection's start-up. */
const READY = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);

/** An ErrorResponse as the server sends it for pg_terminate_backend. */
function fatalTermination(): Buffer {
  const fields = Buffer.concat([
    ...[
      ['S', 'FATAL'],
      ['V', 'FATAL'],
      ['C', '57P01'],
      ['M', 'terminating connection due to administrator command'],
    ].map(([tag, text]) => Buffer.from(`${tag}${text}\u0000`, 'utf8')),
    Buffer.from([0]),
  ]);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'latin1');
  header.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([header, fields]);
}

/**
 * A loopback proxy in front of the real server. The first `poisoned` new
 * connections get the server's termination FATAL in the same TCP chunk as
 * their first ReadyForQuery, then lose their socket: the moment `pg` hands a
 * new client to pg-pool, which passes it on before a promise continuation
 * could attach any listener. Later connections pass through untouched.
 */
async function startupFatalProxy(target: URL, poisoned: number): Promise<{ url: string; injected: () => number; close: () => void }> {
  let injected = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((downstream) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(downstream).add(upstream);
    let poison = injected < poisoned;
    if (poison) injected++;
    downstream.on('error', () => upstream.destroy());
    upstream.on('error', () => downstream.destroy());
    downstream.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      const at = poison ? chunk.indexOf(READY) : -1;
      if (at < 0) {
        downstream.write(chunk);
        return;
      }
      poison = false;
      downstream.end(Buffer.concat([chunk.subarray(0, at + READY.length), fatalTermination()]));
      upstream.destroy();
    });
    upstream.on('end', () => downstream.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String(address.port);
  return {
    url: url.toString(),
    injected: () => injected,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe('a connection terminated right as it is handed out', () => {
  it('a FATAL in the same chunk as the first ReadyForQuery fails the call, never the process', { timeout: 120_000 }, async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend });
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    const proxy = await startupFatalProxy(new URL(databaseUrl()), 5);
    cleanups.push(proxy.close);
    const loop = new FaultLoop({ url: proxy.url, schema: backend.schema, applicationName: `rheo-startup-${backend.schema}`, mode: 'owned', ops: ['lag'] });
    cleanups.push(() => loop.kill());
    await loop.until((calls) => calls.some((c) => c.ok));
    const exit = await loop.stop();
    expect(proxy.injected()).toBe(5);
    expect(exit.stderr).toBe('');
    expect(exit.exitCode).toBe(0);
    const failed = loop.calls.filter((c) => !c.ok);
    expect(failed.length).toBeGreaterThan(0);
    for (const call of failed) expect(call.code, call.name).toBe('backend_unavailable');
  });
});
