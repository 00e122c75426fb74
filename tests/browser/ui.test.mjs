// Browser test of the web UI served by `qwenserve serve`: headless Chromium (Debian package
// `chromium`) driven by npm `playwright-core` opens `/`, sends a message, watches the streamed reply
// grow, then opens `/dashboard` and checks that the charts are drawn from `/stats`.
//
// Screenshots go to QS_SCREENSHOT_DIR (ctest: <build>/screenshots) so CI can keep them.
// Env: as tests/e2e/server_harness.mjs, plus CHROMIUM (default /usr/bin/chromium).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, cleanWorkDir, REPO_ROOT } from '../e2e/server_harness.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SCREENSHOT_DIR = path.resolve(REPO_ROOT, process.env.QS_SCREENSHOT_DIR || 'build/screenshots');

let server;
let browser;

before(async () => {
  assert.ok(fs.existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install chromium or set CHROMIUM`);
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  server = await startServer(['--ctx-size', '1024']);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (server) await server.stop();
  cleanWorkDir();
});

test('chat page: a message gets a streamed reply with TTFT and tokens/s', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  const pageErrors = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  const chatRequests = [];
  page.on('request', (req) => {
    if (req.url().endsWith('/v1/chat/completions')) chatRequests.push(req.postDataJSON());
  });

  await page.goto(`${server.url}/`);
  // The model badge is filled from GET /v1/models.
  await page.waitForFunction(() => !/loading/.test(document.querySelector('#model-name').textContent));
  await page.fill('#system-prompt', 'You are a terse assistant.');
  await page.fill('#max-tokens', '160');
  await page.fill('#temperature', '0');

  // Record every distinct text the reply shows while its state is "streaming": more than one
  // means the UI rendered deltas as they arrived rather than the finished reply at once.
  await page.evaluate(() => {
    window.__snapshots = [];
    const observer = new MutationObserver(() => {
      const node = document.querySelector('.message.assistant');
      if (!node || node.dataset.state !== 'streaming') return;
      const text = node.querySelector('.content').textContent;
      const seen = window.__snapshots;
      if (text && seen[seen.length - 1] !== text) seen.push(text);
    });
    observer.observe(document.querySelector('#messages'), { subtree: true, childList: true, characterData: true, attributes: true });
  });

  await page.fill('#prompt', 'Write a long story about a fast inference server.');
  await page.click('#send');
  await page.waitForSelector('.message.user');
  await page.waitForFunction(() => {
    const node = document.querySelector('.message.assistant');
    return node && node.dataset.state && node.dataset.state !== 'streaming';
  }, null, { timeout: 60_000 });

  const reply = await page.evaluate(() => {
    const node = document.querySelector('.message.assistant');
    return {
      state: node.dataset.state,
      text: node.querySelector('.content').textContent,
      ttft: node.querySelector('.ttft').textContent,
      tps: node.querySelector('.tps').textContent,
      error: node.querySelector('.error').hidden ? '' : node.querySelector('.error').textContent,
      snapshots: window.__snapshots.length,
      user: document.querySelector('.message.user .content').textContent,
    };
  });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'chat.png'), fullPage: true });

  assert.deepEqual(pageErrors, []);
  assert.equal(reply.error, '');
  assert.equal(reply.user, 'Write a long story about a fast inference server.');
  assert.ok(reply.text.length > 0, 'the reply has text');
  assert.ok(reply.snapshots >= 2, `the reply grew while streaming (saw ${reply.snapshots} distinct texts)`);
  assert.match(reply.ttft, /TTFT\s+[\d.]+\s*(ms|s)/);
  assert.match(reply.tps, /[\d.]+/);

  // The UI asked for a stream with the controls' values and the system prompt as the first turn.
  assert.equal(chatRequests.length, 1);
  const body = chatRequests[0];
  assert.equal(body.stream, true);
  assert.equal(body.temperature, 0);
  assert.equal(body.max_tokens, 160);
  assert.deepEqual(body.messages[0], { role: 'system', content: 'You are a terse assistant.' });
  assert.equal(body.messages.at(-1).role, 'user');
  await page.close();
});

test('dashboard: charts drawn from /stats with the chat request counted', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  const pageErrors = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  await page.goto(`${server.url}/dashboard`);
  await page.waitForFunction(() => document.querySelector('#stats-status').dataset.state === 'ok',
    null, { timeout: 20_000 });
  // Two polls so every line chart has at least two points.
  await page.waitForTimeout(2500);
  const view = await page.evaluate(() => {
    const canvases = [...document.querySelectorAll('canvas')];
    return {
      charts: canvases.map((c) => ({ id: c.id, chart: Boolean(window.Chart && window.Chart.getChart(c)), width: c.width, height: c.height })),
      ttftP50: document.querySelector('#stat-ttft-p50').textContent,
      e2eP95: document.querySelector('#stat-e2e-p95').textContent,
    };
  });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard.png'), fullPage: true });
  assert.deepEqual(pageErrors, []);
  assert.ok(view.charts.length >= 5, `charts: ${JSON.stringify(view.charts)}`);
  for (const c of view.charts) {
    assert.ok(c.chart, `Chart.js chart on #${c.id}`);
    assert.ok(c.width > 0 && c.height > 0, `#${c.id} has a size`);
  }
  // The chat request of the previous test is in /stats, so the TTFT cards show numbers.
  const stats = await (await fetch(`${server.url}/stats`)).json();
  assert.ok(JSON.stringify(stats).length > 2);
  assert.match(view.ttftP50, /[\d.]+/);
  assert.match(view.e2eP95, /[\d.]+/);
  await page.close();
});
