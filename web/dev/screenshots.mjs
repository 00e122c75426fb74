// Drives the web UI in headless Chromium over the DevTools protocol (no npm packages: Node >= 20
// with --experimental-websocket, or Node >= 22), checks what it sees and saves screenshots.
//
//   python3 web/dev/mock_server.py --quiet &          # or a real `qwenserve serve`
//   node --experimental-websocket web/dev/screenshots.mjs [--base http://127.0.0.1:8765] [--out DIR]
//
// Screenshots (DIR, default web/dev/screenshots/): chat-light.png, chat-dark.png, chat-error.png,
// chat-stop.png, dashboard-light.png, dashboard-dark.png. Prints one line per check and exits 1
// if one failed. The chat checks assume the mock's scenarios (web/dev/mock_server.py).
import {spawn} from 'node:child_process';
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {dirname, join} from 'node:path';
import {fileURLToPath} from 'node:url';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) =>
  (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const BASE = args.base || 'http://127.0.0.1:8765';
const OUT = args.out || join(dirname(fileURLToPath(import.meta.url)), 'screenshots');
const CHROMIUM = args.chromium || process.env.CHROMIUM || 'chromium';
mkdirSync(OUT, {recursive: true});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let failures = 0;
function check(name, ok, detail = '') {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` (${detail})` : ''}`);
  if (!ok) failures++;
}

// ------------------------------------------------------------------ browser

const profile = mkdtempSync(join(tmpdir(), 'qs-chromium-'));
const browser = spawn(CHROMIUM, [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-dev-shm-usage', '--no-first-run', '--hide-scrollbars', `--user-data-dir=${profile}`,
  '--remote-debugging-port=0', 'about:blank',
], {stdio: ['ignore', 'ignore', 'pipe']});
const wsUrl = await new Promise((resolve, reject) => {
  let err = '';
  browser.stderr.on('data', (d) => {
    err += d;
    const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
    if (m) resolve(m[1]);
  });
  browser.on('exit', (code) => reject(new Error(`chromium exited (${code}): ${err}`)));
  setTimeout(() => reject(new Error(`chromium did not start: ${err}`)), 20000);
});

const ws = new WebSocket(wsUrl);
await new Promise((resolve, reject) => {
  ws.onopen = resolve;
  ws.onerror = reject;
});
let nextId = 1;
const pending = new Map();
const listeners = [];
ws.onmessage = (event) => {
  const msg = JSON.parse(event.data);
  if (msg.id && pending.has(msg.id)) {
    const {resolve, reject} = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.error) reject(new Error(`${msg.error.message} ${msg.error.data || ''}`));
    else resolve(msg.result);
  } else if (msg.method) {
    for (const l of listeners) l(msg);
  }
};
function cdp(method, params = {}, sessionId) {
  const id = nextId++;
  ws.send(JSON.stringify({id, method, params, sessionId}));
  return new Promise((resolve, reject) => pending.set(id, {resolve, reject}));
}
function waitEvent(method, sessionId, timeoutMs = 15000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timeout waiting for ${method}`)), timeoutMs);
    const l = (msg) => {
      if (msg.method === method && msg.sessionId === sessionId) {
        clearTimeout(timer);
        listeners.splice(listeners.indexOf(l), 1);
        resolve(msg.params);
      }
    };
    listeners.push(l);
  });
}

async function openPage({scheme = 'light', width = 1280, height = 860} = {}) {
  const {targetId} = await cdp('Target.createTarget', {url: 'about:blank'});
  const {sessionId} = await cdp('Target.attachToTarget', {targetId, flatten: true});
  const page = {
    sessionId,
    consoleErrors: [],
    send: (method, params) => cdp(method, params, sessionId),
    async goto(path) {
      const loaded = waitEvent('Page.loadEventFired', sessionId);
      await this.send('Page.navigate', {url: BASE + path});
      await loaded;
    },
    async eval(expression) {
      const r = await this.send('Runtime.evaluate', {expression, awaitPromise: true, returnByValue: true});
      if (r.exceptionDetails) throw new Error(`${expression}: ${JSON.stringify(r.exceptionDetails)}`);
      return r.result.value;
    },
    async waitFor(expression, timeoutMs = 15000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        if (await this.eval(expression)) return true;
        if (Date.now() > until) return false;
        await sleep(100);
      }
    },
    async screenshot(name) {
      const {data} = await this.send('Page.captureScreenshot', {format: 'png'});
      writeFileSync(join(OUT, name), Buffer.from(data, 'base64'));
      console.log(`     screenshot ${join(OUT, name)}`);
    },
    close: () => cdp('Target.closeTarget', {targetId}),
  };
  listeners.push((msg) => {
    if (msg.sessionId !== sessionId) return;
    if (msg.method === 'Runtime.exceptionThrown') {
      page.consoleErrors.push(msg.params.exceptionDetails.exception?.description || msg.params.exceptionDetails.text);
    } else if (msg.method === 'Runtime.consoleAPICalled' && msg.params.type === 'error') {
      page.consoleErrors.push(msg.params.args.map((a) => a.value ?? a.description).join(' '));
    } else if (msg.method === 'Log.entryAdded' && msg.params.entry.level === 'error') {
      page.consoleErrors.push(`${msg.params.entry.text} ${msg.params.entry.url || ''}`);
    }
  });
  await page.send('Page.enable');
  await page.send('Runtime.enable');
  await page.send('Log.enable');
  await page.send('Emulation.setDeviceMetricsOverride', {width, height, deviceScaleFactor: 1, mobile: false});
  await page.send('Emulation.setEmulatedMedia', {features: [{name: 'prefers-color-scheme', value: scheme}]});
  return page;
}

// Types a prompt and sends it with the Send button; resolves when the reply has settled.
async function sendPrompt(page, text) {
  const before = await page.eval(`document.querySelectorAll('.message.assistant').length`);
  await page.eval(`(() => { const p = document.querySelector('#prompt'); p.value = ${JSON.stringify(text)};
                            document.querySelector('#send').click(); })()`);
  return page.waitFor(`(() => { const a = document.querySelectorAll('.message.assistant');
    return a.length > ${before} && a[a.length - 1].dataset.state !== 'streaming'; })()`, 30000);
}

const lastReply = (page) => page.eval(`(() => {
  const a = [...document.querySelectorAll('.message.assistant')].pop();
  return a && {state: a.dataset.state, ttft: a.dataset.ttftMs, tps: a.dataset.tokensPerSecond,
    tokens: a.dataset.completionTokens, finish: a.dataset.finishReason,
    html: a.querySelector('.content').innerHTML, error: a.querySelector('.error').hidden ? null :
    a.querySelector('.error').textContent, reasoningShown: !a.querySelector('.reasoning').hidden,
    reasoning: a.querySelector('.reasoning-content').textContent,
    metrics: a.querySelector('.metrics').textContent};
})()`);

// ------------------------------------------------------------------ chat

async function chat(scheme) {
  const page = await openPage({scheme});
  await page.goto('/');
  check(`[${scheme}] model name loaded`, await page.waitFor(`document.querySelector('#model-name').dataset.state === 'ok'`),
        await page.eval(`document.querySelector('#model-name').textContent`));
  await page.eval(`document.querySelector('#system-prompt').value = 'You are terse.'`);
  await page.eval(`document.querySelector('#temperature').value = '0.3'`);

  // Watch the stream: the content must grow over several frames before the reply is done.
  await page.eval(`window.__lengths = []; (function watch() {
    const a = [...document.querySelectorAll('.message.assistant')].pop();
    if (a) window.__lengths.push(a.querySelector('.content').textContent.length);
    if (!a || a.dataset.state === 'streaming') requestAnimationFrame(watch); })()`);
  check(`[${scheme}] first reply finished`, await sendPrompt(page, 'Show me some Markdown please'));
  let r = await lastReply(page);
  const lengths = await page.eval(`window.__lengths`);
  const distinct = new Set(lengths).size;
  check(`[${scheme}] reply streamed`, distinct > 10, `${distinct} distinct lengths`);
  check(`[${scheme}] state done`, r.state === 'done', r.state);
  check(`[${scheme}] TTFT measured`, Number(r.ttft) > 0, `${r.ttft} ms`);
  check(`[${scheme}] tokens/s measured`, Number(r.tps) > 0, `${r.tps} tok/s, ${r.tokens} tokens, ${r.finish}`);
  check(`[${scheme}] markdown rendered`, /<table>/.test(r.html) && /<ol>/.test(r.html) && /<strong>/.test(r.html));
  check(`[${scheme}] code highlighted`, /class="hljs-keyword"/.test(r.html) && /hljs/.test(r.html));
  check(`[${scheme}] links open in a new tab`, /target="_blank"/.test(r.html));
  check(`[${scheme}] params sent`, /temperature=0.3/.test(r.html));

  check(`[${scheme}] reasoning reply finished`, await sendPrompt(page, 'think about it, then answer'));
  r = await lastReply(page);
  check(`[${scheme}] reasoning collapsible shown`, r.reasoningShown && r.reasoning.length > 20);
  check(`[${scheme}] history is multi-turn`, /has 4 message/.test(r.html), 'system + user + assistant + user');
  const open = await page.eval(`[...document.querySelectorAll('.reasoning')].pop().open`);
  if (open === false) await page.eval(`[...document.querySelectorAll('.reasoning')].pop().open = true`);
  await page.eval(`document.querySelector('#messages').scrollTop = 1e9`);
  await sleep(200);
  check(`[${scheme}] no console errors`, page.consoleErrors.length === 0, page.consoleErrors.join(' | '));
  await page.screenshot(`chat-${scheme}.png`);
  await page.close();
}

async function chatErrorsAndStop() {
  const page = await openPage({scheme: 'light', height: 760});
  await page.goto('/');
  await page.waitFor(`document.querySelector('#model-name').dataset.state === 'ok'`);
  await sendPrompt(page, 'Please produce an error');
  let r = await lastReply(page);
  check('HTTP error shown inline', r.state === 'error' && /temperature must be/.test(r.error || ''), r.error);
  const restored = await page.eval(`document.querySelector('#prompt').value`);
  check('failed prompt restored', restored === 'Please produce an error', restored);
  await page.eval(`document.querySelector('#prompt').value = ''`);
  await sendPrompt(page, 'midstream failure please');
  r = await lastReply(page);
  check('mid-stream error shown inline', r.state === 'error' && /KV cache/.test(r.error || ''), r.error);
  await page.eval(`document.querySelector('#prompt').value = ''`);
  await page.screenshot('chat-error.png');

  await page.eval(`document.querySelector('#new-chat').click()`);
  check('new chat clears messages', await page.eval(`document.querySelectorAll('.message').length === 0`));
  await page.eval(`document.querySelector('#prompt').value = 'a long slow reply'; document.querySelector('#send').click()`);
  await page.waitFor(`(document.querySelector('.message.assistant .content')?.textContent.length || 0) > 80`);
  check('stop enabled while streaming', await page.eval(`!document.querySelector('#stop').disabled && document.querySelector('#send').disabled`));
  await page.eval(`document.querySelector('#stop').click()`);
  await page.waitFor(`document.querySelector('.message.assistant').dataset.state !== 'streaming'`);
  r = await lastReply(page);
  check('stop aborts the stream', r.state === 'stopped' && r.finish === 'stopped', `${r.state}, ${r.metrics}`);
  const len1 = await page.eval(`document.querySelector('.message.assistant .content').textContent.length`);
  await sleep(500);
  const len2 = await page.eval(`document.querySelector('.message.assistant .content').textContent.length`);
  check('no text after stop', len1 === len2);
  check('send re-enabled after stop', await page.eval(`!document.querySelector('#send').disabled && document.querySelector('#stop').disabled`));
  await page.screenshot('chat-stop.png');
  // The 400 of the error scenario is logged by the browser itself; anything else is a failure.
  const unexpected = page.consoleErrors.filter((e) => !/status of 400 .*\/v1\/chat\/completions/.test(e));
  check('no console errors (errors/stop)', unexpected.length === 0, unexpected.join(' | '));
  await page.close();
}

// ------------------------------------------------------------------ dashboard

async function dashboard(scheme) {
  const page = await openPage({scheme, height: 1330});
  await page.goto('/dashboard');
  const ok = await page.waitFor(`Number(document.querySelector('#ttft-chart').dataset.points) >= 6`, 20000);
  check(`[${scheme}] dashboard collected samples`, ok,
        await page.eval(`document.querySelector('#ttft-chart').dataset.points`));
  const ids = ['ttft-chart', 'itl-chart', 'e2e-chart', 'throughput-chart', 'queue-chart', 'kv-chart'];
  for (const id of ids) {
    const n = await page.eval(`(() => { const c = window.qsDashboard.charts[${JSON.stringify(id)}];
      return c.data.datasets.reduce((k, d) => k + d.data.filter((v) => v !== null).length, 0); })()`);
    check(`[${scheme}] #${id} has data`, n > 0, `${n} points`);
  }
  const cards = await page.eval(`['stat-ttft-p50','stat-itl-p99','stat-e2e-p95','stat-gen-tps','stat-rps','stat-running','stat-waiting','stat-kv']
      .map((id) => document.getElementById(id).textContent).join(' / ')`);
  check(`[${scheme}] cards filled`, !cards.includes('—'), cards);
  check(`[${scheme}] status ok`, await page.eval(`document.querySelector('#stats-status').dataset.state === 'ok'`));
  const before = await page.eval(`JSON.stringify(window.qsDashboard.charts['ttft-chart'].data.datasets[0].data)`);
  await page.eval(`(() => { const s = document.querySelector('#window'); s.value = 'window_requests';
                           s.dispatchEvent(new Event('change')); })()`);
  const after = await page.eval(`JSON.stringify(window.qsDashboard.charts['ttft-chart'].data.datasets[0].data)`);
  check(`[${scheme}] window switch redraws`, before !== after);
  await page.eval(`document.querySelector('#pause').click()`);
  const n = Number(await page.eval(`document.querySelector('#ttft-chart').dataset.points`));
  await sleep(2200);
  check(`[${scheme}] pause stops polling`, Number(await page.eval(`document.querySelector('#ttft-chart').dataset.points`)) === n &&
        await page.eval(`document.querySelector('#stats-status').dataset.state === 'paused'`));
  await page.eval(`document.querySelector('#pause').click()`);
  check(`[${scheme}] resume polls again`, await page.waitFor(`Number(document.querySelector('#ttft-chart').dataset.points) > ${n}`, 5000));
  check(`[${scheme}] no console errors`, page.consoleErrors.length === 0, page.consoleErrors.join(' | '));
  await page.screenshot(`dashboard-${scheme}.png`);
  await page.close();
}

try {
  await chat('light');
  await chat('dark');
  await chatErrorsAndStop();
  await dashboard('light');
  await dashboard('dark');
} catch (e) {
  check('driver', false, e.stack || String(e));
} finally {
  ws.close();
  browser.kill();
  await sleep(300);
  rmSync(profile, {recursive: true, force: true});
}
console.log(failures ? `${failures} check(s) failed` : 'all checks passed');
process.exit(failures ? 1 : 0);
