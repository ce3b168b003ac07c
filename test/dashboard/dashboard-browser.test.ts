import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboard, type RunningDashboard } from '../../src/dashboard/index.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { makeTestBackend } from '../support/postgres.js';

/** Debian's chromium; `.ci/run` installs it when missing. */
const CHROMIUM = '/usr/bin/chromium';
/**
 * Where the screenshots go: the documentation's images with
 * RHEO_UPDATE_SCREENSHOTS=1, else a scratch directory (a test run leaves the
 * committed images as they are).
 */
const IMAGES = process.env.RHEO_UPDATE_SCREENSHOTS
  ? join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'docs', 'images')
  : mkdtempSync(join(tmpdir(), 'rheo-dashboard-shots-'));

/**
 * The dashboard in a real headless browser against PostgreSQL: what a user
 * sees and clicks, not what the API answers (dashboard-api.test.ts does that).
 */
describe('dashboard in headless chromium', () => {
  let browser: Browser;
  let rheo: Rheo;
  const dashboards: RunningDashboard[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`${CHROMIUM} is missing: the dashboard test drives Debian's chromium (apt-get install -y chromium; .ci/run does it)`);
    }
    // As root (CI containers), chromium refuses to start without --no-sandbox.
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    rheo = createRheo({ backend: await makeTestBackend() });
    await rheo.createStream('orders', { partitions: 3 });
    await rheo.createStream('audit');
    await rheo.createGroup('orders', 'billing', { maxAttempts: 3 });
    await rheo.createGroup('orders', 'shipping');
    await rheo.createGroup('audit', 'archive');
    await rheo.appendBatch('orders', Array.from({ length: 30 }, (_, i) => ({ type: 'order.paid', key: `customer-${i % 7}`, payload: { order: 1000 + i, total: 12.5 * (i + 1) } })));
    await rheo.append('audit', { payload: { login: 'ada' } });
    // Two dead letters and three live leases in billing; shipping untouched.
    const leases = await rheo.fetch('orders', 'billing', { limit: 5, partitions: [0] });
    await rheo.reject(leases[0]!, 'invalid card number');
    await rheo.reject(leases[1]!, 'customer unknown');
  }, 60_000);

  afterAll(async () => {
    await Promise.all(dashboards.map((d) => d.close()));
    await browser?.close();
    await rheo?.close();
    if (!process.env.RHEO_UPDATE_SCREENSHOTS) rmSync(IMAGES, { recursive: true, force: true });
  });

  async function open(allowWrites: boolean): Promise<{ page: Page; dashboard: RunningDashboard }> {
    const dashboard = await startDashboard(rheo, { port: 0, allowWrites });
    dashboards.push(dashboard);
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const failures: string[] = [];
    page.on('pageerror', (error) => failures.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') failures.push(message.text());
    });
    await page.goto(`${dashboard.url}?refresh=200#orders/billing`);
    await page.waitForSelector('body[data-ready="true"]');
    expect(failures).toEqual([]);
    return { page, dashboard };
  }

  it('shows the group lag and leases held, the chart follows new appends, and a screenshot is written', async () => {
    const { page } = await open(true);
    const before = await rheo.groupInfo('orders', 'billing');
    expect(await page.textContent('#lag-total')).toBe(String(before.lag.lag));
    expect(await page.textContent('#leases-held')).toBe('3');
    expect(await page.textContent('#dead-count')).toBe('2');
    const row = page.locator('#groups tbody tr[data-group="billing"]');
    expect(await row.locator('td.lag').textContent()).toBe(String(before.lag.lag));
    expect(await page.locator('#partitions tbody tr').count()).toBe(3);

    await rheo.appendBatch('orders', Array.from({ length: 20 }, (_, i) => ({ type: 'order.paid', payload: { order: 2000 + i } })));
    const expected = String(before.lag.lag + 20);
    await page.waitForSelector(`#chart[data-last="${expected}"]`);
    expect(await page.textContent('#lag-total')).toBe(expected);
    // The chart drew a line through more than one sample, the last at the new lag.
    const samples = Number(await page.getAttribute('#chart', 'data-samples'));
    expect(samples).toBeGreaterThan(1);
    expect(await page.locator('#chart polyline.line').count()).toBe(1);

    await page.locator('#dead-letters tbody tr').first().getByRole('button', { name: 'payload' }).click();
    expect(await page.textContent('#payload')).toContain('"order"');
    mkdirSync(IMAGES, { recursive: true });
    await page.screenshot({ path: join(IMAGES, 'dashboard.png'), fullPage: true });
    await page.close();
  }, 60_000);

  it('a redrive from the page asks for confirmation, then changes the backend', async () => {
    const { page } = await open(true);
    const [first, second] = await rheo.deadLetters('orders', 'billing');
    expect(await page.locator('#dead-letters tbody tr').count()).toBe(2);

    // Cancelling the confirmation writes nothing.
    await page.click('#redrive-all');
    await page.waitForSelector('dialog#confirm[open]');
    expect(await page.textContent('#confirm-text')).toContain('Redrive every dead letter');
    await page.click('#confirm-cancel');
    expect((await rheo.groupInfo('orders', 'billing')).deadLetters).toBe(2);

    await page.locator(`#dead-letters tbody tr[data-event-id="${second!.event.id}"] button.redrive-one`).click();
    await page.waitForSelector('dialog#confirm[open]');
    await page.screenshot({ path: join(IMAGES, 'dashboard-redrive.png') });
    await page.click('#confirm-ok');
    await page.locator('#status', { hasText: 'redrove 1 dead letter(s)' }).waitFor();
    const info = await rheo.groupInfo('orders', 'billing');
    expect(info.deadLetters).toBe(1);
    expect((await rheo.deadLetters('orders', 'billing')).map((d) => d.event.id)).toEqual([first!.event.id]);
    await page.locator('#dead-letters tbody tr').nth(1).waitFor({ state: 'detached' });
    // The redriven event is offered again, with attempts reset.
    const again = await rheo.fetch('orders', 'billing', { limit: 10, partitions: [0] });
    expect(again.find((l) => l.event.id === second!.event.id)?.attempt).toBe(1);
    await page.close();
  }, 60_000);

  it('a replay from the page, after confirmation, reopens settled events of the group', async () => {
    const [lease] = await rheo.fetch('audit', 'archive');
    await rheo.ack(lease!);
    expect((await rheo.lag('audit', 'archive')).lag).toBe(0);
    const { page } = await open(true);
    await page.click('#groups tbody tr[data-group="archive"]');
    await page.waitForSelector('#detail-title:text-is("archive on audit")');
    await page.fill('#replay-from', '1');
    await page.click('#replay');
    await page.waitForSelector('dialog#confirm[open]');
    expect(await page.textContent('#confirm-text')).toContain('Replay group "archive" from sequence 1');
    await page.click('#confirm-ok');
    await page.locator('#status', { hasText: 'replay started' }).waitFor();
    expect((await rheo.lag('audit', 'archive')).lag).toBe(1);
    await page.waitForSelector('#lag-total:text-is("1")');
    await page.close();
  }, 60_000);

  it('read-only by default: no write buttons, and the page says so', async () => {
    const { page } = await open(false);
    expect(await page.textContent('#mode')).toBe('read-only');
    expect(await page.isVisible('#redrive-all')).toBe(false);
    expect(await page.isVisible('#replay')).toBe(false);
    expect(await page.locator('button.redrive-one').count()).toBe(0);
    await page.close();
  }, 60_000);
});
