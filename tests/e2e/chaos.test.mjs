// Chaos end-to-end test of `qwenserve serve` (issue 16), loopback only and bounded (~1 minute):
// 200 concurrent clients that disconnect at random points (before the head or body ends, after the
// first token, mid-stream, while waiting for a non-streamed answer) or read everything; slow
// clients (head and body trickled one byte per second, a reader that never reads its stream, a
// head of thousands of headers); a 10x overload burst; then SIGTERM in the middle of such load.
//
// Pass: the server never crashes or hangs (every connection ends), /health answers throughout,
// the trickled head and body are cut off by --request-head-timeout / --request-body-timeout, the
// huge head gets 431, every request that reached the engine either completed or was cancelled
// because its client left, afterwards no KV block is referenced (/stats kv_blocks), the running
// and waiting gauges are back to 0 and the HTTP worker pool serves a fresh burst.
//
// The waits that stand for a hang (a connection open after 60 s, /health slower than 5 s, gauges
// not back within 10 s, ...) are bounds for the release build; for a sanitizer build, which runs
// the same load several times slower, scripts/test.sh sets QS_E2E_TIME_SCALE and they are
// multiplied by it (scaled()). The deadlines the server enforces (2 s head, 3 s body) are not.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/chaos.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, makeTinyModel, cleanWorkDir, scaled, TIME_SCALE } from './server_harness.mjs';

const HEAD_TIMEOUT_S = 2;
const BODY_TIMEOUT_S = 3;
const MAX_NUM_SEQS = 4;
const MAX_QUEUE = 60;
let server;

before(async () => {
  await makeTinyModel();
  server = await startServer(['--max-num-seqs', String(MAX_NUM_SEQS), '--max-queue', String(MAX_QUEUE),
    '--log-format', 'json', '--request-head-timeout', String(HEAD_TIMEOUT_S),
    '--request-body-timeout', String(BODY_TIMEOUT_S), '--shutdown-grace', '3']);
});

after(async () => {
  if (server && !server.exit) await server.stop();
  cleanWorkDir();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let seed = 12345;
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const pick = (items) => items[Math.floor(rand() * items.length)];

const chatBody = (extra = {}) => JSON.stringify({
  messages: [{ role: 'user', content: `chaos ${Math.floor(rand() * 1e6)}` }], max_tokens: 24, temperature: 1, ...extra,
});

function head(port, method, path, body, extraHeaders = '') {
  return `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n${extraHeaders}\r\n`;
}

/**
 * One raw connection. `script(sock, state)` writes and may destroy; resolves with
 * {bytes (received), closedByServer, ms} once the socket is closed. Rejects after `timeoutMs`
 * (a hang).
 */
function connection(port, script, timeoutMs = scaled(30000), label = script.name || 'connection') {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const sock = net.connect(port, '127.0.0.1');
    const state = { received: Buffer.alloc(0), destroyedByUs: false, onData: null };
    const timer = setTimeout(async () => {
      // A hang or a slow queue? The engine's gauges at this moment tell (still working = slow).
      const gauges = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5000) })
        .then((r) => r.text())
        .then((text) => text.split('\n').filter((l) => /^qwenserve_num_requests_(running|waiting) /.test(l)).join(', '))
        .catch((e) => `no /metrics: ${e.message}`);
      sock.destroy();
      const got = state.received.toString('utf8');
      reject(new Error(`${label}: connection still open after ${timeoutMs} ms (server: ${gauges}); received ` +
        `${got.length} bytes: ${JSON.stringify(got.length > 600 ? `${got.slice(0, 300)} ... ${got.slice(-300)}` : got)}`));
    }, timeoutMs);
    sock.on('data', (d) => { state.received = Buffer.concat([state.received, d]); if (state.onData) state.onData(state.received); });
    sock.on('error', () => {});
    sock.on('close', () => {
      clearTimeout(timer);
      resolve({ label, text: state.received.toString('utf8'), closedByServer: !state.destroyedByUs, ms: performance.now() - t0 });
    });
    sock.on('connect', () => script(sock, state));
  });
}

const hangUp = (sock, state) => { state.destroyedByUs = true; sock.destroy(); };

/** The 200 chaos clients' behaviours. */
const behaviours = {
  // Sends part of the head, then leaves.
  partialHead: (port) => connection(port, (s, st) => {
    const h = head(port, 'POST', '/v1/chat/completions', chatBody());
    s.write(h.slice(0, 1 + Math.floor(rand() * (h.length - 2))));
    setTimeout(() => hangUp(s, st), rand() * 200);
  }, scaled(60000), 'partialHead'),
  // Sends the head and part of the body, then leaves.
  partialBody: (port) => connection(port, (s, st) => {
    const b = chatBody();
    s.write(head(port, 'POST', '/v1/chat/completions', b) + b.slice(0, Math.floor(rand() * (b.length - 1))));
    setTimeout(() => hangUp(s, st), rand() * 200);
  }, scaled(60000), 'partialBody'),
  // Streams and leaves after the first content token.
  afterFirstToken: (port) => connection(port, (s, st) => {
    const b = chatBody({ stream: true, max_tokens: 60 });
    st.onData = (buf) => { if (/"content":"[^"]/.test(buf.toString('utf8'))) hangUp(s, st); };
    s.write(head(port, 'POST', '/v1/chat/completions', b) + b);
  }, scaled(60000), 'afterFirstToken'),
  // Streams and leaves after a random number of bytes.
  midStream: (port) => connection(port, (s, st) => {
    const b = JSON.stringify({ prompt: `mid ${Math.floor(rand() * 1e6)}`, stream: true, max_tokens: 60 });
    const limit = 200 + Math.floor(rand() * 3000);
    st.onData = (buf) => { if (buf.length > limit) hangUp(s, st); };
    s.write(head(port, 'POST', '/v1/completions', b) + b);
  }, scaled(60000), 'midStream'),
  // Waits for a non-streamed answer for a random time, then leaves.
  impatient: (port) => connection(port, (s, st) => {
    const b = chatBody({ max_tokens: 100 });
    s.write(head(port, 'POST', '/v1/chat/completions', b) + b);
    setTimeout(() => hangUp(s, st), rand() * 400);
  }, scaled(60000), 'impatient'),
  // Reads everything (Connection: close ends it).
  complete: (port) => connection(port, (s) => {
    const b = chatBody({ stream: rand() < 0.5 });
    s.write(head(port, 'POST', '/v1/chat/completions', b, 'Connection: close\r\n') + b);
  }, scaled(60000), 'complete'),
};

/** Polls /health every 100 ms; returns {stop(): {ok, failures, maxMs}}. */
function healthMonitor(port) {
  const stats = { ok: 0, failures: [], maxMs: 0 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      try {
        const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(scaled(5000)) });
        await res.text();
        if (res.status === 200) stats.ok++; else stats.failures.push(`status ${res.status}`);
      } catch (e) {
        stats.failures.push(String(e.message || e));
      }
      stats.maxMs = Math.max(stats.maxMs, performance.now() - t0);
      await sleep(100);
    }
  })();
  return { stop: async () => { running = false; await loop; return stats; } };
}

async function settle(srv) {
  // Gauges back to 0 and no referenced KV block, within 10 s.
  const deadline = Date.now() + scaled(10000);
  let last;
  for (;;) {
    const m = await srv.metrics();
    const stats = (await srv.get('/stats')).json;
    last = { running: m.values.get('qwenserve_num_requests_running'), waiting: m.values.get('qwenserve_num_requests_waiting'),
      kv: stats.kv_blocks };
    if ((last.running === 0 && last.waiting === 0 && last.kv.referenced === 0) || Date.now() > deadline) return last;
    await sleep(100);
  }
}

test('chaos: 200 clients leaving at random points, slow clients, a 10x burst; /health throughout; all recovers', async (t) => {
  const port = server.port;
  const health = healthMonitor(port);

  // Slow clients, started first so that they run during the rest.
  const trickleHead = connection(port, (s) => {
    const h = head(port, 'POST', '/v1/chat/completions', chatBody());
    let i = 0;
    const timer = setInterval(() => { if (i < h.length && !s.destroyed) s.write(h[i++]); else clearInterval(timer); }, 1000);
    s.on('close', () => clearInterval(timer));
  });
  const trickleBody = connection(port, (s) => {
    const b = chatBody();
    s.write(head(port, 'POST', '/v1/chat/completions', b));
    let i = 0;
    const timer = setInterval(() => { if (i < b.length && !s.destroyed) s.write(b[i++]); else clearInterval(timer); }, 1000);
    s.on('close', () => clearInterval(timer));
  });
  const manyHeaders = connection(port, (s) => {
    let extra = '';
    for (let i = 0; i < 2000; i++) extra += `X-Chaos-${i}: ${'v'.repeat(60)}\r\n`;
    s.write(head(port, 'GET', '/health', '', extra));
  });
  // A client that never reads its stream: the engine and everyone else carry on.
  let nonReaderSock;
  const nonReader = connection(port, (s, st) => {
    nonReaderSock = { s, st };
    s.pause();
    const b = JSON.stringify({ prompt: 'never read', stream: true, max_tokens: 1500, temperature: 1 });
    s.write(head(port, 'POST', '/v1/completions', b) + b);
  }, scaled(120000), 'non-reader');

  // 200 concurrent chaos clients.
  const names = Object.keys(behaviours);
  const counts = {};
  const chaos = [];
  for (let i = 0; i < 200; i++) {
    const name = pick(names);
    counts[name] = (counts[name] || 0) + 1;
    chaos.push(behaviours[name](port));
  }
  const results = await Promise.all(chaos);
  t.diagnostic(`chaos clients: ${JSON.stringify(counts)}; all ${results.length} connections ended`);
  const slowest = {};
  for (const r of results) slowest[r.label] = Math.max(slowest[r.label] || 0, Math.round(r.ms));
  t.diagnostic(`longest connection per behaviour (ms; hang bound ${scaled(60000)} ms, QS_E2E_TIME_SCALE ${TIME_SCALE}): ` +
    JSON.stringify(slowest));
  const completed = results.filter((r) => r.closedByServer);
  for (const r of completed) assert.match(r.text, /^HTTP\/1\.1 (200|429) /, r.text.slice(0, 200));

  // 10x overload burst: 10 x (max-num-seqs + max-queue) short requests at once.
  const burstSize = 10 * (MAX_NUM_SEQS + MAX_QUEUE);
  const burst = await Promise.all(Array.from({ length: burstSize }, () => connection(port, (s) => {
    const b = JSON.stringify({ prompt: 'burst', max_tokens: 2 });
    s.write(head(port, 'POST', '/v1/completions', b, 'Connection: close\r\n') + b);
  }, scaled(60000), 'burst')));
  const statuses = {};
  for (const r of burst) {
    const status = (r.text.match(/^HTTP\/1\.1 (\d+)/) || [])[1] || 'none';
    statuses[status] = (statuses[status] || 0) + 1;
  }
  t.diagnostic(`10x burst of ${burstSize}: ${JSON.stringify(statuses)}, longest ${Math.round(Math.max(...burst.map((r) => r.ms)))} ms`);
  assert.deepEqual(Object.keys(statuses).filter((s) => s !== '200' && s !== '429'), [], JSON.stringify(statuses));
  assert.ok(statuses['200'] >= MAX_NUM_SEQS, `some of the burst were served: ${JSON.stringify(statuses)}`);

  // The slow clients were cut off by the deadlines, the huge head got 431.
  const [head1, body1, many] = await Promise.all([trickleHead, trickleBody, manyHeaders]);
  t.diagnostic(`head trickle cut after ${Math.round(head1.ms)} ms, body trickle after ${Math.round(body1.ms)} ms`);
  assert.ok(head1.closedByServer && head1.text === '', 'the trickled head got no response, the server closed it');
  assert.ok(head1.ms >= HEAD_TIMEOUT_S * 1000 - 100 && head1.ms < HEAD_TIMEOUT_S * 1000 + scaled(3000), `head cut at ${head1.ms} ms`);
  assert.ok(body1.closedByServer && body1.ms < BODY_TIMEOUT_S * 1000 + scaled(3000), `body cut at ${body1.ms} ms`);
  assert.match(many.text, /^HTTP\/1\.1 431 /, many.text.slice(0, 100));
  assert.match(many.text, /request_header_too_large/);

  // The non-reader is still connected (or done); let it go.
  hangUp(nonReaderSock.s, nonReaderSock.st);
  await nonReader;

  const hs = await health.stop();
  t.diagnostic(`/health: ${hs.ok} answers, max ${Math.round(hs.maxMs)} ms, failures ${JSON.stringify(hs.failures)}`);
  assert.deepEqual(hs.failures, [], '/health answered throughout');
  assert.ok(hs.maxMs < scaled(5000), `/health took ${hs.maxMs} ms`);

  const settled = await settle(server);
  t.diagnostic(`after the chaos: ${JSON.stringify(settled)}`);
  assert.equal(settled.running, 0, 'running gauge back to 0');
  assert.equal(settled.waiting, 0, 'waiting gauge back to 0');
  assert.equal(settled.kv.referenced, 0, 'no KV block referenced (all free or cached)');

  // Every request the engine saw completed, or was cancelled because its client left.
  const records = server.logRecords();
  const bad = records.filter((r) => !((r.status === 200 && (r.error === undefined || r.error === null)) ||
    (r.status === 499 && r.error === 'client disconnected')));
  t.diagnostic(`${records.length} requests reached the engine, ${records.filter((r) => r.error === 'client disconnected').length} cancelled by a disconnect`);
  assert.deepEqual(bad.slice(0, 3).map((r) => ({ status: r.status, error: r.error, finish_reason: r.finish_reason })), [],
    'no request failed otherwise');

  // The worker pool and the queue recovered: a fresh burst of --max-queue requests (the places a
  // burst is guaranteed, see admission.test.mjs; a leaked place would turn one into a 429) is served.
  const fresh = await Promise.all(Array.from({ length: MAX_QUEUE }, () =>
    server.post('/v1/completions', { prompt: 'after', max_tokens: 2 })));
  assert.deepEqual([...new Set(fresh.map((r) => r.status))], [200]);
  assert.equal(server.exit, null, 'the server is still running');
});

test('SIGTERM in the middle of chaos: every connection ends, exit 0 within the grace period', async (t) => {
  const port = server.port;
  const names = Object.keys(behaviours);
  const load = [];
  for (let i = 0; i < 100; i++) load.push(behaviours[pick(names)](port).catch((e) => ({ error: e.message })));
  const streams = Array.from({ length: 8 }, () => server.stream('/v1/completions',
    { prompt: 'drain', stream: true, max_tokens: 60 }).catch((e) => ({ error: String(e) })));
  await sleep(300);
  const t0 = performance.now();
  const exit = await server.stop(scaled(15000));
  const ms = performance.now() - t0;
  t.diagnostic(`exit ${JSON.stringify(exit)} after ${Math.round(ms)} ms`);
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(ms < 3000 + scaled(5000), `exited within the grace period (+5 s): ${ms} ms`);
  const ended = await Promise.race([Promise.all([...load, ...streams]).then(() => true), sleep(scaled(10000)).then(() => false)]);
  assert.ok(ended, 'every connection ended');
});
