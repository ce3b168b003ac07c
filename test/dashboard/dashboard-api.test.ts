import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createDashboardHandler, startDashboard, type DashboardOptions, type RunningDashboard } from '../../src/dashboard/index.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { backendFactories } from '../support/backends.js';

const WRITE_HEADERS = { 'content-type': 'application/json', 'x-rheo-dashboard': '1' };

async function call(base: string, path: string, init?: RequestInit): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(new URL(path, base), { ...init, redirect: 'manual' });
  const text = await response.text();
  return { status: response.status, body: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : { text, location: response.headers.get('location') } };
}

for (const factory of backendFactories) {
  describe(`dashboard API (${factory.name})`, () => {
    let rheo: Rheo;
    let clock: ManualClock;
    let running: RunningDashboard[] = [];
    let servers: Server[] = [];
    beforeEach(async () => {
      clock = new ManualClock(Date.UTC(2026, 0, 1));
      rheo = createRheo({ backend: await factory.make(clock), clock });
      await rheo.createStream('orders', { partitions: 2 });
      await rheo.createGroup('orders', 'billing');
      running = [];
      servers = [];
    });
    afterEach(async () => {
      await Promise.all(running.map((d) => d.close()));
      await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
      await rheo.close();
    });
    async function serve(options: Parameters<typeof startDashboard>[1] = {}): Promise<string> {
      const dashboard = await startDashboard(rheo, { port: 0, ...options });
      running.push(dashboard);
      return dashboard.url;
    }
    async function deadLetter(n: number): Promise<string[]> {
      const events = await rheo.appendBatch('orders', Array.from({ length: n }, (_, i) => ({ payload: { n: i }, partition: 0 })));
      for (const lease of await rheo.fetch('orders', 'billing', { limit: n })) await rheo.reject(lease, 'bad input');
      return events.map((e) => e.id);
    }

    it('listens on 127.0.0.1 unless another host is asked for', async () => {
      const url = await serve();
      expect(new URL(url).hostname).toBe('127.0.0.1');
      expect((running[0]!.server.address() as AddressInfo).address).toBe('127.0.0.1');
    });

    it('reports streams, groups, lag per partition with its age, leases held and dead letters with payloads', async () => {
      const url = await serve();
      const ids = await deadLetter(1);
      await rheo.appendBatch('orders', [{ payload: 1, partition: 0 }, { payload: 2, partition: 0 }, { payload: 3, partition: 1 }]);
      clock.advance(4_000);
      await rheo.fetch('orders', 'billing', { limit: 1, partitions: [1] });
      const overview = await call(url, 'api/overview');
      expect(overview.status).toBe(200);
      expect(overview.body).toMatchObject({
        allowWrites: false,
        streams: [{ name: 'orders', partitions: 2, groups: [{ name: 'billing', lag: 3, leasesHeld: 1, deadLetters: 1 }] }],
      });
      const group = await call(url, 'api/group?stream=orders&group=billing');
      expect(group.body).toMatchObject({
        lag: 3,
        leasesHeld: 1,
        partitions: [
          { partition: 0, frontier: 1, highWatermark: 3, lag: 2, ageMs: 4_000 },
          { partition: 1, frontier: 0, highWatermark: 1, lag: 1, ageMs: 4_000 },
        ],
      });
      const dead = await call(url, 'api/dead-letters?stream=orders&group=billing');
      expect(dead.body.deadLetters).toEqual([
        expect.objectContaining({ attempt: 1, reason: 'bad input', event: expect.objectContaining({ id: ids[0], payload: { n: 0 } }) }),
      ]);
    });

    it('answers bad input with 400 and the RheoError code, unknown names with 404', async () => {
      const url = await serve({ allowWrites: true });
      const cases: Array<[string, number, string, RequestInit?]> = [
        ['api/group?stream=orders', 400, 'invalid_argument'],
        ['api/group?stream=bad%20name&group=g', 400, 'invalid_argument'],
        ['api/group?stream=missing&group=g', 404, 'stream_not_found'],
        ['api/group?stream=orders&group=missing', 404, 'group_not_found'],
        ['api/dead-letters?stream=orders&group=billing&limit=-1', 400, 'invalid_argument'],
        ['api/dead-letters?stream=orders&group=billing&limit=0', 400, 'invalid_argument'],
        ['api/dead-letters?stream=orders&group=billing&after=nope', 400, 'cursor_not_found'],
        ['api/nothing-here', 404, 'invalid_argument'],
        ['api/overview', 405, 'invalid_argument', { method: 'DELETE' }],
        ['api/redrive', 400, 'invalid_argument', { method: 'POST', headers: WRITE_HEADERS, body: '{not json' }],
        ['api/redrive', 400, 'invalid_argument', { method: 'POST', headers: WRITE_HEADERS, body: '[1]' }],
        ['api/redrive', 400, 'invalid_argument', { method: 'POST', headers: WRITE_HEADERS, body: '{"stream":"orders"}' }],
        ['api/redrive', 400, 'invalid_argument', { method: 'POST', headers: WRITE_HEADERS, body: '{"stream":"orders","group":"billing","eventIds":"x"}' }],
        ['api/redrive', 400, 'invalid_argument', { method: 'POST', headers: WRITE_HEADERS, body: JSON.stringify({ stream: 'orders', group: 'billing', pad: 'x'.repeat(70_000) }) }],
        ['api/replay', 400, 'invalid_argument', { method: 'POST', headers: WRITE_HEADERS, body: '{"stream":"orders","group":"billing"}' }],
        ['api/replay', 400, 'invalid_argument', { method: 'POST', headers: WRITE_HEADERS, body: '{"stream":"orders","group":"billing","from":"yesterday"}' }],
        ['api/replay', 400, 'invalid_argument', { method: 'POST', headers: WRITE_HEADERS, body: '{"stream":"orders","group":"billing","fromSequence":0}' }],
        ['api/replay', 400, 'invalid_partition', { method: 'POST', headers: WRITE_HEADERS, body: '{"stream":"orders","group":"billing","fromSequence":1,"partitions":[7]}' }],
        ['api/redrive', 404, 'group_not_found', { method: 'POST', headers: WRITE_HEADERS, body: '{"stream":"orders","group":"nobody"}' }],
      ];
      for (const [path, status, code, init] of cases) {
        const answer = await call(url, path, init);
        expect({ path, body: init?.body?.toString().slice(0, 80), status: answer.status, code: (answer.body.error as { code?: string } | undefined)?.code }).toEqual({
          path,
          body: init?.body?.toString().slice(0, 80),
          status,
          code,
        });
      }
      // Nothing above wrote anything.
      expect((await rheo.groupInfo('orders', 'billing')).lag.lag).toBe(0);
    });

    it('is read-only by default: writes answer 403 and change nothing', async () => {
      const url = await serve();
      await deadLetter(2);
      for (const route of ['redrive', 'replay']) {
        const answer = await call(url, `api/${route}`, { method: 'POST', headers: WRITE_HEADERS, body: '{"stream":"orders","group":"billing","fromSequence":1}' });
        expect(answer.status).toBe(403);
        expect(answer.body.error).toMatchObject({ code: 'permission_denied' });
      }
      expect((await rheo.groupInfo('orders', 'billing')).deadLetters).toBe(2);
    });

    it('with allowWrites, redrive and replay change the backend; a write without the dashboard header is refused', async () => {
      const url = await serve({ allowWrites: true });
      const ids = await deadLetter(3);
      const formPost = await call(url, 'api/redrive', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'stream=orders&group=billing',
      });
      expect(formPost.status).toBe(403);
      const noHeader = await call(url, 'api/redrive', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"stream":"orders","group":"billing"}' });
      expect(noHeader.status).toBe(403);
      expect((await rheo.groupInfo('orders', 'billing')).deadLetters).toBe(3);

      const one = await call(url, 'api/redrive', { method: 'POST', headers: WRITE_HEADERS, body: JSON.stringify({ stream: 'orders', group: 'billing', eventIds: [ids[1]] }) });
      expect(one).toEqual({ status: 200, body: { stream: 'orders', group: 'billing', redriven: 1 } });
      expect((await rheo.groupInfo('orders', 'billing')).deadLetters).toBe(2);
      const [again] = await rheo.fetch('orders', 'billing');
      expect(again?.event.id).toBe(ids[1]);
      await rheo.ack(again!);

      const replay = await call(url, 'api/replay', { method: 'POST', headers: WRITE_HEADERS, body: JSON.stringify({ stream: 'orders', group: 'billing', eventIds: [ids[1]] }) });
      expect(replay.status).toBe(200);
      const [replayed] = await rheo.fetch('orders', 'billing');
      expect(replayed?.event.id).toBe(ids[1]);
    });

    it('asks the authorize hook first, telling it whether the request writes', async () => {
      const seen: Array<{ path: string | undefined; write: boolean }> = [];
      const authorize: DashboardOptions['authorize'] = (request: IncomingMessage, { write }) => {
        seen.push({ path: request.url, write });
        return request.headers.authorization === 'Bearer ok';
      };
      const url = await serve({ allowWrites: true, authorize });
      expect((await call(url, 'api/overview')).status).toBe(403);
      expect((await call(url, '')).status).toBe(403);
      expect((await call(url, 'api/overview', { headers: { authorization: 'Bearer ok' } })).status).toBe(200);
      const write = await call(url, 'api/redrive', { method: 'POST', headers: { ...WRITE_HEADERS, authorization: 'Bearer no' }, body: '{"stream":"orders","group":"billing"}' });
      expect(write.status).toBe(403);
      expect(seen.map((s) => s.write)).toEqual([false, false, false, true]);
    });

    it('mounts under a path in a plain node:http server, falls through to next() elsewhere, and redirects to the trailing slash', async () => {
      const handler = createDashboardHandler(rheo, { basePath: '/ops/rheo' });
      const server = createServer((request, response) =>
        handler(request, response, () => {
          response.writeHead(200, { 'content-type': 'text/plain' }).end('the application');
        }),
      );
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      expect((await call(base, 'elsewhere')).body.text).toBe('the application');
      const redirect = await call(base, 'ops/rheo');
      expect(redirect.status).toBe(308);
      expect(redirect.body.location).toBe('/ops/rheo/');
      const page = await call(base, 'ops/rheo/');
      expect(page.status).toBe(200);
      expect(String(page.body.text)).toContain('<title>rheo dashboard</title>');
      expect((await call(base, 'ops/rheo/dashboard.js')).status).toBe(200);
      expect((await call(base, 'ops/rheo/api/overview')).body).toMatchObject({ streams: [{ name: 'orders' }] });
    });

    it('mounts like Express does it: the framework strips the mount path from url and keeps originalUrl', async () => {
      const handler = createDashboardHandler(rheo);
      const server = createServer((request, response) => {
        const req = request as IncomingMessage & { originalUrl?: string };
        if (!req.url?.startsWith('/admin/rheo')) return response.writeHead(404).end();
        req.originalUrl = req.url;
        req.url = req.url.slice('/admin/rheo'.length) || '/';
        handler(req, response, () => response.writeHead(404).end());
      });
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      expect((await call(base, 'admin/rheo')).body.location).toBe('/admin/rheo/');
      expect((await call(base, 'admin/rheo/api/group?stream=orders&group=billing')).body).toMatchObject({ lag: 0 });
    });

    it('refuses bad options with invalid_argument', async () => {
      expect(() => createDashboardHandler(rheo, { basePath: 'rheo' })).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
      expect(() => createDashboardHandler(rheo, { authorize: true as unknown as DashboardOptions['authorize'] })).toThrow(
        expect.objectContaining({ code: 'invalid_argument' }),
      );
      await expect(startDashboard(rheo, { port: 70_000 })).rejects.toMatchObject({ code: 'invalid_argument' });
      const url = await serve();
      await expect(startDashboard(rheo, { port: Number(new URL(url).port) })).rejects.toMatchObject({ code: 'invalid_argument' });
    });
  });
}
