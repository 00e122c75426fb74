// The llm-d model-server contract, tested on three qwenserve replicas on loopback (the tiny
// random-weight model), the way an Endpoint Picker (EPP) and Prometheus see them:
//   - `promtool check metrics` is clean on each (with --metrics-compat vllm, promtool's lint about
//     ':' in metric names, which vLLM's names carry by design, is the only message allowed);
//   - every family the shipped EPP configuration names (deploy/kustomize/components/
//     inference-gateway: engineConfigs and the legacy flags; the EPP's built-in "vllm" engine for
//     the compat replica) exists, is a gauge and has exactly one series matching the spec, parsed
//     as the EPP parses it; every family the alerts and the KEDA trigger name exists;
//   - KV usage is in [0, 1]; cache_config_info's labels equal the block size and block count the
//     server printed at startup and reports in /stats;
//   - load on one replica raises its waiting gauge while the others stay at 0, and it falls back
//     to 0 after; a 20 Hz scraper on one keep-alive connection is answered throughout and takes
//     no place of a request (--max-num-seqs + --max-queue requests are all admitted);
//   - SIGTERM: /ready answers 503 at once, in-flight requests complete, the process exits 0.
// Metrics are parsed with npm parse-prometheus-text-format, not with our own code.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/deploy/contract.test.mjs
// Env: see tests/e2e/server_harness.mjs (QS_BIN, QS_WORK_DIR, QS_TOKENIZER_DIR).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import parsePrometheusText from 'parse-prometheus-text-format';
import YAML from 'yaml';
import { startServer, makeTinyModel, cleanWorkDir } from '../e2e/server_harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DEPLOY = path.resolve(HERE, '..', '..', 'deploy');
const GATEWAY = path.join(DEPLOY, 'kustomize', 'components', 'inference-gateway');
const COMPAT_MODEL = 'qwen3-test';
const MAX_NUM_SEQS = 1;
const MAX_QUEUE = 6;

// The EPP's built-in engine entry for vLLM (llm-d router, datalayer/extractor/metrics/factories.go,
// defaultEngineConfigs "vllm"): what a pod without an engine label is scraped for.
const EPP_VLLM_ENGINE = {
  queuedRequestsSpec: 'vllm:num_requests_waiting',
  runningRequestsSpec: 'vllm:num_requests_running',
  kvUsageSpec: 'vllm:kv_cache_usage_perc',
  cacheInfoSpec: 'vllm:cache_config_info',
};

let loaded; // --max-num-seqs 1 --max-queue 6: the replica under load
let compat; // --metrics-compat vllm
let plain;

before(async () => {
  await makeTinyModel();
  [loaded, compat, plain] = await Promise.all([
    startServer(['--max-num-seqs', String(MAX_NUM_SEQS), '--max-queue', String(MAX_QUEUE), '--kv-cache-memory', '1MiB',
      '--no-output-guard', '--log-format', 'none']),
    startServer(['--metrics-compat', 'vllm', '--served-model-name', COMPAT_MODEL, '--kv-cache-memory', '2MiB',
      '--log-format', 'none']),
    startServer(['--kv-cache-memory', '3MiB', '--no-output-guard', '--log-format', 'none']),
  ]);
  // One finished request each, so that every labeled family has its series.
  for (const s of [loaded, compat, plain]) {
    const res = await s.post('/v1/completions', { prompt: 'hello', max_tokens: 4, temperature: 0 });
    assert.equal(res.status, 200, res.text);
  }
});

after(async () => {
  for (const s of [loaded, compat, plain]) if (s && !s.exit) await s.stop();
  cleanWorkDir();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const replicas = () => [['loaded', loaded], ['compat', compat], ['plain', plain]];

/** GET /metrics parsed by parse-prometheus-text-format: Map name -> {type, metrics}. */
async function families(server) {
  const res = await server.get('/metrics');
  assert.equal(res.status, 200);
  return new Map(parsePrometheusText(res.text).map((f) => [f.name, f]));
}

/** A metric spec as the EPP reads it: `name` or `name{label=value,label="value"}`. */
function parseSpec(spec) {
  const m = /^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{([^}]*)\})?\s*$/.exec(spec);
  assert.ok(m, `metric spec ${JSON.stringify(spec)}`);
  const labels = {};
  for (const pair of (m[2] || '').split(',').filter((p) => p.trim())) {
    const lm = /^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"?([^"]*)"?\s*$/.exec(pair);
    assert.ok(lm, `label pair ${pair} of ${spec}`);
    labels[lm[1]] = lm[2];
  }
  return { name: m[1], labels };
}

/** The one series of `fams` matching `spec` (a gauge); fails unless there is exactly one. */
function oneGaugeSeries(fams, spec, where) {
  const { name, labels } = parseSpec(spec);
  const family = fams.get(name);
  assert.ok(family, `${where}: family ${name} exists`);
  assert.equal(family.type, 'GAUGE', `${where}: ${name} is a gauge`);
  const matching = family.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  assert.equal(matching.length, 1, `${where}: exactly one series of ${spec}`);
  return matching[0];
}

function qwenserveEngine() {
  const epp = YAML.parse(fs.readFileSync(path.join(GATEWAY, 'epp-config.yaml'), 'utf8'));
  const extractor = epp.plugins.find((p) => p.type === 'core-metrics-extractor').parameters;
  const engine = extractor.engineConfigs.find((e) => e.name === 'qwenserve');
  assert.ok(engine, 'the EPP config has a qwenserve engine entry');
  return engine;
}

function promtoolCheck(text) {
  return new Promise((resolve) => {
    const child = execFile('promtool', ['check', 'metrics'], (err, stdout, stderr) => resolve({
      code: err ? err.code : 0, output: `${stdout}${stderr}`, missing: err?.code === 'ENOENT',
    }));
    child.stdin.on('error', () => {});
    child.stdin.end(text);
  });
}

test('promtool check metrics: clean for the default names, only the ":" lint for vLLM names', async () => {
  for (const [name, server] of replicas()) {
    const { text } = await server.metrics();
    const res = await promtoolCheck(text);
    assert.ok(!res.missing, 'promtool not installed (Debian package prometheus, see scripts/install-deps.sh)');
    if (server !== compat) {
      assert.equal(res.code, 0, `${name}: promtool check metrics:\n${res.output}`);
      assert.equal(res.output.trim(), '', `${name}: no lint messages`);
      continue;
    }
    const lines = res.output.trim().split('\n').filter((l) => l.trim());
    const allowed = /^(vllm:[a-zA-Z0-9_:]+) metric names should not contain ':'$/;
    for (const line of lines) assert.match(line, allowed, `${name}: only the ':' lint is tolerated`);
    assert.ok(res.code === 0 || res.code === 3, `${name}: promtool exit ${res.code} (3 = lint only):\n${res.output}`);
    const linted = new Set(lines.map((l) => allowed.exec(l)[1]));
    assert.ok(linted.has('vllm:num_requests_waiting'), 'promtool read the vLLM families');
  }
});

test('every family the EPP config names is a gauge with exactly one matching series', async () => {
  const engine = qwenserveEngine();
  const specs = ['queuedRequestsSpec', 'runningRequestsSpec', 'kvUsageSpec', 'cacheInfoSpec'];
  const flags = fs.readFileSync(path.join(GATEWAY, 'epp-legacy-flags.txt'), 'utf8').trim().split('\n')
    .map((l) => l.split('=').slice(1).join('=')).filter((v) => v !== '');
  for (const [name, server] of replicas()) {
    const fams = await families(server);
    for (const key of specs) oneGaugeSeries(fams, engine[key], `${name} ${key}`);
    for (const spec of flags) oneGaugeSeries(fams, spec, `${name} legacy flag`);
  }
  // The compat replica also serves an EPP that runs its built-in vLLM engine (zero config).
  const fams = await families(compat);
  for (const [key, spec] of Object.entries(EPP_VLLM_ENGINE)) oneGaugeSeries(fams, spec, `compat vllm ${key}`);
  for (const spec of Object.values(EPP_VLLM_ENGINE)) {
    if (!spec.startsWith('vllm:num_') && !spec.startsWith('vllm:kv_')) continue;
    assert.equal(oneGaugeSeries(fams, spec, 'compat').labels.model_name, COMPAT_MODEL, `${spec} has model_name`);
  }
  for (const name of ['vllm:time_to_first_token_seconds', 'vllm:inter_token_latency_seconds',
    'vllm:e2e_request_latency_seconds', 'vllm:request_queue_time_seconds']) {
    assert.equal(fams.get(name)?.type, 'HISTOGRAM', `${name} is a histogram`);
  }
  for (const name of ['vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:request_success_total']) {
    assert.equal(fams.get(name)?.type, 'COUNTER', `${name} is a counter`);
    for (const m of fams.get(name).metrics) assert.equal(m.labels.model_name, COMPAT_MODEL, name);
  }
  assert.equal(fams.get('vllm:prompt_tokens_total').metrics[0].value,
    fams.get('qwenserve_prompt_tokens_total').metrics[0].value, 'same count under both names');
  for (const [, server] of [['loaded', loaded], ['plain', plain]]) {
    for (const name of (await families(server)).keys()) assert.ok(!name.startsWith('vllm:'), `${name} only with compat`);
  }
});

test('every family the alerts and the KEDA trigger name exists', async () => {
  const sources = [
    fs.readFileSync(path.join(DEPLOY, 'monitoring', 'alerts.yaml'), 'utf8'),
    fs.readFileSync(path.join(DEPLOY, 'kustomize', 'components', 'keda', 'scaledobject.yaml'), 'utf8'),
  ];
  const named = new Set(sources.flatMap((s) => s.match(/qwenserve_[a-z_]+/g) || [])
    .map((n) => n.replace(/_(bucket|sum|count)$/, '')));
  assert.ok(named.size >= 4);
  const fams = await families(plain);
  for (const name of named) assert.ok(fams.has(name), `${name} is exported`);
});

test('KV usage in [0,1]; cache_config_info = the block size and count the server reports', async () => {
  for (const [name, server] of replicas()) {
    const fams = await families(server);
    const usage = Number(oneGaugeSeries(fams, 'qwenserve_kv_cache_usage_perc', name).value);
    assert.ok(usage >= 0 && usage <= 1, `${name}: KV usage ${usage}`);
    const startup = /KV (\d+) blocks = (\d+) tokens/.exec(server.stderr);
    assert.ok(startup, `${name}: startup line with the KV geometry:\n${server.stderr}`);
    const blocks = Number(startup[1]);
    const blockSize = Number(startup[2]) / blocks;
    const stats = (await server.get('/stats')).json;
    assert.equal(stats.kv_blocks.total, blocks, `${name}: /stats and the startup line agree`);
    const info = oneGaugeSeries(fams, 'qwenserve_cache_config_info', name);
    assert.equal(Number(info.value), 1);
    assert.deepEqual(info.labels, { block_size: String(blockSize), num_gpu_blocks: String(blocks) }, name);
    if (server === compat) {
      assert.deepEqual(oneGaugeSeries(fams, 'vllm:cache_config_info', name).labels, info.labels);
      assert.equal(oneGaugeSeries(fams, 'vllm:kv_cache_usage_perc', name).value,
        oneGaugeSeries(fams, 'qwenserve_kv_cache_usage_perc', name).value);
    }
  }
  const counts = new Set(await Promise.all(replicas().map(async ([, s]) => (await s.get('/stats')).json.kv_blocks.total)));
  assert.equal(counts.size, 3, 'three KV budgets, three block counts: the labels follow each server');
});

/** GET /metrics every 50 ms on one keep-alive connection until stopped; records each scrape. */
function startScraper(server) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const scrapes = [];
  let running = true;
  const done = (async () => {
    while (running) {
      const t0 = performance.now();
      const result = await new Promise((resolve) => {
        const req = http.get({ host: '127.0.0.1', port: server.port, path: '/metrics', agent }, (res) => {
          let bytes = 0;
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d) => { bytes += Buffer.byteLength(d); body += d; });
          res.on('end', () => resolve({ status: res.statusCode, bytes, body, reused: req.reusedSocket }));
        });
        req.on('error', (e) => resolve({ status: 0, error: e.message }));
      });
      const ms = performance.now() - t0;
      const m = /^qwenserve_num_requests_waiting (\S+)$/m.exec(result.body || '');
      scrapes.push({ ms, status: result.status, bytes: result.bytes, reused: result.reused,
        waiting: m ? Number(m[1]) : NaN, error: result.error });
      await sleep(Math.max(0, 50 - ms));
    }
  })();
  return { scrapes, stop: async () => { running = false; await done; agent.destroy(); } };
}

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

test('load on one replica raises only its waiting gauge; a 20 Hz keep-alive scraper takes no place', async () => {
  const scraper = startScraper(loaded);
  const others = { compat: [], plain: [] };
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      for (const [name, server] of [['compat', compat], ['plain', plain]]) {
        const fams = await families(server);
        others[name].push(Number(oneGaugeSeries(fams, 'qwenserve_num_requests_waiting', name).value));
      }
      await sleep(100);
    }
  })();
  await sleep(300); // the scraper holds its connection before the load starts
  // --max-num-seqs + --max-queue requests: every one must be admitted although the scraper holds a
  // connection (and so a worker thread) all along.
  const body = { prompt: 'count to a thousand', max_tokens: 150, temperature: 0, stream: true };
  const admitted = Array.from({ length: MAX_NUM_SEQS + MAX_QUEUE }, (_, i) =>
    sleep(i * 20).then(() => loaded.stream('/v1/completions', body)));
  // Wait until the queue is full, then one more request must be refused at once (the limit is real).
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline && !scraper.scrapes.some((s) => s.waiting >= MAX_QUEUE)) await sleep(20);
  const extra = await loaded.post('/v1/completions', { ...body, stream: false });
  const results = await Promise.all(admitted);
  for (const r of results) {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.events.at(-1)?.data, '[DONE]', 'the stream completed');
  }
  assert.equal(extra.status, 429, `one request past --max-num-seqs + --max-queue: ${extra.text}`);
  // Back to idle.
  let idle = false;
  for (const until = Date.now() + 5000; Date.now() < until && !idle;) {
    const fams = await families(loaded);
    idle = Number(oneGaugeSeries(fams, 'qwenserve_num_requests_waiting', 'loaded').value) === 0
      && Number(oneGaugeSeries(fams, 'qwenserve_num_requests_running', 'loaded').value) === 0;
    if (!idle) await sleep(50);
  }
  await sleep(200);
  watching = false;
  await watcher;
  await scraper.stop();
  const s = scraper.scrapes;
  assert.ok(idle, 'waiting and running fall back to 0 after the load');
  assert.ok(s.every((x) => x.status === 200), `every scrape answered 200: ${JSON.stringify(s.filter((x) => x.status !== 200))}`);
  const peak = Math.max(...s.map((x) => x.waiting));
  assert.ok(peak >= MAX_QUEUE, `the loaded replica's waiting gauge rose to ${peak}`);
  assert.equal(s.at(-1).waiting, 0, 'the last scrape sees an empty queue');
  assert.deepEqual([...new Set(others.compat)], [0], 'the compat replica stayed at 0 waiting');
  assert.deepEqual([...new Set(others.plain)], [0], 'the plain replica stayed at 0 waiting');
  const reused = s.filter((x) => x.reused).length;
  assert.ok(reused >= s.length - 1, `one keep-alive connection: ${s.length - reused} connections for ${s.length} scrapes`);
  const ms = s.map((x) => x.ms);
  console.log(`# /metrics under load (${s.length} scrapes at 20 Hz, one connection): p50 ${quantile(ms, 0.5).toFixed(2)} ms, `
    + `p99 ${quantile(ms, 0.99).toFixed(2)} ms, max ${Math.max(...ms).toFixed(2)} ms, ${s.at(-1).bytes} bytes`);
});

test('/metrics size and scrape time, default and vLLM-compatible names', async () => {
  for (const [name, server] of [['default', plain], ['compat', compat]]) {
    const times = [];
    let bytes = 0;
    for (let i = 0; i < 40; i++) {
      const t0 = performance.now();
      const res = await server.get('/metrics');
      times.push(performance.now() - t0);
      bytes = Buffer.byteLength(res.text);
    }
    console.log(`# /metrics ${name}: ${bytes} bytes, p50 ${quantile(times, 0.5).toFixed(2)} ms, `
      + `max ${Math.max(...times).toFixed(2)} ms (40 idle scrapes, fetch)`);
    assert.ok(bytes < 200_000, `${name}: ${bytes} bytes`);
  }
});

test('SIGTERM: /ready 503 at once, in-flight requests complete, exit 0', async () => {
  // Two streams running (the gauge says so), then SIGTERM.
  const body = { prompt: 'drain me', max_tokens: 300, temperature: 0, stream: true };
  const inFlight = [plain.stream('/v1/completions', body), plain.stream('/v1/completions', body)];
  let running = 0;
  for (let until = Date.now() + 5000; Date.now() < until && running < 2;) {
    running = Number(oneGaugeSeries(await families(plain), 'qwenserve_num_requests_running', 'plain').value);
    if (running < 2) await sleep(2);
  }
  assert.equal(running, 2, 'both requests were running when SIGTERM came');
  const signalled = performance.now();
  plain.proc.kill('SIGTERM');
  // Readiness flips as soon as the drain starts (the EPP and the kubelet stop routing here).
  let readyStatus = 0;
  let readyBody = null;
  const readyBy = performance.now() + 1000;
  while (performance.now() < readyBy) {
    const ready = await plain.get('/ready');
    readyStatus = ready.status;
    readyBody = ready.json;
    if (readyStatus === 503) break;
    await sleep(5);
  }
  const readyMs = performance.now() - signalled;
  assert.equal(readyStatus, 503, '/ready answers 503 while draining');
  assert.equal(readyBody?.error?.code, 'server_shutdown', JSON.stringify(readyBody));
  assert.ok(readyMs < 500, `/ready went 503 ${readyMs.toFixed(0)} ms after SIGTERM`);
  assert.equal((await plain.get('/health')).status, 200, '/health (liveness) stays 200 while draining');
  const results = await Promise.all(inFlight);
  for (const r of results) {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.events.at(-1)?.data, '[DONE]', 'the in-flight stream completed');
  }
  const exit = await plain.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, plain.stderr.slice(-2000));
});
