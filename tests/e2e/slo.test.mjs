// End-to-end tests of issue 12 on the tiny random-weight model: SLO-aware admission under a 10x
// overload burst, the Server-Timing header against the W3C grammar and the log line, the response
// cache, and load-adaptive degradation.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/slo.test.mjs
// Env: see server_harness.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, makeTinyModel, cleanWorkDir } from './server_harness.mjs';

const SLO_MS = 2000;  // a loaded 2-core CI machine prefills the tiny model at ~1 ms per token
let slo;       // --slo-ttft-ms SLO_MS, 2 sequences at once
let cached;    // --response-cache-size 16KiB
let degrade;   // --degrade-at-kv: degraded while anything runs

before(async () => {
  await makeTinyModel();
  [slo, cached, degrade] = await Promise.all([
    startServer(['--slo-ttft-ms', String(SLO_MS), '--max-num-seqs', '2', '--max-queue', '512', '--log-format', 'json']),
    startServer(['--response-cache-size', '16KiB', '--log-format', 'json']),
    startServer(['--degrade-at-kv', '0.000001', '--degraded-max-tokens', '3', '--default-max-tokens', '40',
      '--no-output-guard', '--log-format', 'json']),
  ]);
});

after(async () => {
  for (const s of [slo, cached, degrade]) if (s && !s.exit) await s.stop();
  cleanWorkDir();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const words = (n, seed) => Array.from({ length: n }, (_, i) => `w${(i * 7919 + seed) % 1000}`).join(' ');
const chat = (content, extra = {}) => ({ messages: [{ role: 'user', content }], temperature: 0, ...extra });

// ---- SLO-aware admission ----------------------------------------------------------------------

test('10x overload burst: 200 or 429 with Retry-After = max(1, ceil(predicted - T)); admitted TTFT <= 2T; none lost', async (t) => {
  // Calibrate the learned step costs (prefill and decode) with a few requests first.
  for (let i = 0; i < 3; i++) {
    // A generous per-request SLO: admitted whatever the first (uncalibrated) measurements say.
    const r = await slo.post('/v1/chat/completions', chat(words(200, 1000 + i), { max_tokens: 16, slo_ttft_ms: 600000 }));
    assert.equal(r.status, 200, r.text);
  }
  // Then two overlapping requests, so that steps carrying a prefill chunk next to a running decode
  // (what the burst's admitted requests go through) are measured too, as on a server that has
  // been serving for a while; sequential requests alone teach only prefill-only and decode-only
  // steps.
  for (let i = 0; i < 2; i++) {
    const first = slo.post('/v1/chat/completions', chat(words(200, 2000 + i), { max_tokens: 32, slo_ttft_ms: 600000 }));
    await sleep(150);
    const second = slo.post('/v1/chat/completions', chat(words(200, 3000 + i), { max_tokens: 16, slo_ttft_ms: 600000 }));
    for (const r of await Promise.all([first, second])) assert.equal(r.status, 200, r.text);
  }
  // Capacity is 2 running sequences; 40 at once with long prompts and outputs is a 20x burst.
  const bodies = Array.from({ length: 40 }, (_, i) => chat(words(300, i), { max_tokens: 48 }));
  const results = await Promise.all(bodies.map((b) => slo.post('/v1/chat/completions', b)));
  let admitted = 0;
  let rejected = 0;
  const pairs = [];  // [measured, predicted] TTFT of the admitted requests, ms
  for (const r of results) {
    if (r.status === 429) {
      rejected++;
      assert.equal(r.json?.error?.code, 'slo_ttft_unattainable', r.text);
      assert.equal(r.json.error.type, 'rate_limit_error');
      const m = /predicted time to first token ([0-9.]+) ms exceeds the TTFT SLO of ([0-9.]+) ms/.exec(r.json.error.message);
      assert.ok(m, r.json.error.message);
      const predicted = Number(m[1]);
      assert.equal(Number(m[2]), SLO_MS);
      assert.ok(predicted > SLO_MS);
      const expected = Math.max(1, Math.ceil((predicted - SLO_MS) / 1000));
      assert.equal(r.headers.get('retry-after'), String(expected));
      continue;
    }
    assert.equal(r.status, 200, r.text);
    admitted++;
    assert.equal(r.json.choices.length, 1);
    assert.ok(['stop', 'length'].includes(r.json.choices[0].finish_reason));
    const rec = await slo.logRecordFor(r.json.id);
    assert.ok(rec, `log line of ${r.json.id}`);
    assert.equal(rec.status, 200);
    assert.ok(rec.ttft_ms <= 2 * SLO_MS, `admitted TTFT ${rec.ttft_ms} ms > 2 x ${SLO_MS} ms (predicted ${rec.predicted_ttft_ms})`);
    assert.equal(typeof rec.predicted_ttft_ms, 'number');
    pairs.push([rec.ttft_ms, rec.predicted_ttft_ms]);
  }
  const ms = (v) => Math.round(v);
  t.diagnostic(`admitted ${admitted}, rejected ${rejected}; admitted TTFT max ${ms(Math.max(...pairs.map((p) => p[0])))} ms; ` +
    `(measured, predicted) ms: ${pairs.map(([m, p]) => `(${ms(m)}, ${ms(p)})`).join(' ')}`);
  assert.equal(admitted + rejected, bodies.length);
  assert.ok(admitted >= 1, 'at least the first requests are admitted');
  const { values } = await slo.metrics();
  assert.equal(values.get('qwenserve_slo_ttft_seconds'), SLO_MS / 1000);
  const met = values.get('qwenserve_slo_requests_total{slo="ttft",result="met"}');
  const missed = values.get('qwenserve_slo_requests_total{slo="ttft",result="missed"}');
  // Every request with an SLO is counted: the served ones against their TTFT, the 429s as missed.
  const warmup = 3 + 2 * 2;  // the sequential and the overlapping calibration requests
  assert.equal(met + missed, admitted + rejected + warmup);
  assert.ok(missed >= rejected, `missed ${missed} < rejected ${rejected}`);
  assert.equal(values.get('qwenserve_ttft_prediction_error_seconds_count'), admitted + warmup);
});

test('priority and slo_ttft_ms are validated', async () => {
  for (const [field, value] of [['priority', 'high'], ['priority', 1.5], ['slo_ttft_ms', 0], ['slo_ttft_ms', 'x']]) {
    const r = await slo.post('/v1/chat/completions', chat('hi', { max_tokens: 1, [field]: value }));
    assert.equal(r.status, 400, `${field}=${JSON.stringify(value)}: ${r.text}`);
    assert.equal(r.json.error.param, field);
  }
  const ok = await slo.post('/v1/chat/completions', chat('hi', { max_tokens: 1, priority: -3, slo_ttft_ms: 60000 }));
  assert.equal(ok.status, 200, ok.text);
});

test('an SLO 429 is counted as a TTFT miss in qwenserve_slo_requests_total', async () => {
  const before = (await slo.metrics()).values;
  const key = 'qwenserve_slo_requests_total{slo="ttft",result="missed"}';
  // 1 microsecond: the time spent preparing the request alone exceeds it.
  const r = await slo.post('/v1/chat/completions', chat('hi', { max_tokens: 1, slo_ttft_ms: 0.001 }));
  assert.equal(r.status, 429, r.text);
  assert.equal(r.json.error.code, 'slo_ttft_unattainable');
  assert.equal(r.headers.get('retry-after'), '1');  // max(1, ceil(predicted - T)) with predicted - T < 1 s
  const after = (await slo.metrics()).values;
  assert.equal(after.get(key), before.get(key) + 1);
  assert.equal(after.get('qwenserve_slo_requests_total{slo="ttft",result="met"}'),
    before.get('qwenserve_slo_requests_total{slo="ttft",result="met"}'));
  assert.equal(after.get('qwenserve_admission_rejections_total'), before.get('qwenserve_admission_rejections_total') + 1);
});

// ---- Latency breakdown ------------------------------------------------------------------------

// W3C Server Timing: #(metric-name *( OWS ";" OWS name OWS "=" OWS (token / quoted-string) )).
function parseServerTiming(header) {
  const token = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
  const param = `${token}[ \\t]*=[ \\t]*(?:${token}|"(?:[^"\\\\]|\\\\.)*")`;
  const metric = new RegExp(`^[ \\t]*(${token})((?:[ \\t]*;[ \\t]*${param})*)[ \\t]*$`);
  const out = {};
  for (const part of header.split(',')) {
    const m = metric.exec(part);
    assert.ok(m, `not a server-timing-metric: ${JSON.stringify(part)} in ${header}`);
    const params = {};
    for (const p of m[2].split(';').slice(1)) {
      const [k, v] = p.split('=').map((s) => s.trim());
      params[k] = v.replace(/^"|"$/g, '');
    }
    out[m[1]] = params;
  }
  return out;
}

test('Server-Timing parses per the W3C grammar and agrees with the log line', async () => {
  const r = await slo.post('/v1/chat/completions', chat(words(40, 5), { max_tokens: 8 }));
  assert.equal(r.status, 200, r.text);
  const timing = parseServerTiming(r.headers.get('server-timing'));
  const rec = await slo.logRecordFor(r.json.id);
  for (const [metric, field] of [['queue', 'queue_ms'], ['prefill', 'prefill_ms'], ['decode', 'decode_ms'],
    ['total', 'e2e_ms'], ['predicted_ttft', 'predicted_ttft_ms']]) {
    assert.ok(Math.abs(Number(timing[metric].dur) - rec[field]) < 1e-3 + 1e-6 * rec[field], `${metric}: ${timing[metric].dur} vs ${rec[field]}`);
  }
  assert.equal(Number(timing.cached_tokens.desc), rec.cached_tokens);
  assert.equal(Number(timing.preemptions.desc), rec.preemptions);
  assert.ok(Math.abs(rec.queue_ms + rec.prefill_ms - rec.ttft_ms) < 1e-6);
});

test('timings only on the final SSE chunk and only with stream_options.include_timings', async () => {
  const plain = await slo.stream('/v1/chat/completions', chat('hello', { max_tokens: 4, stream: true }));
  assert.equal(plain.status, 200);
  assert.ok(plain.events.every((e) => !e.json || !('timings' in e.json)));
  const withTimings = await slo.stream('/v1/chat/completions',
    chat('hello', { max_tokens: 4, stream: true, stream_options: { include_timings: true, include_usage: true } }));
  const data = withTimings.events.filter((e) => e.json);
  assert.equal(withTimings.events.at(-1).data, '[DONE]');
  const last = data.at(-1).json;
  assert.ok(data.slice(0, -1).every((e) => !('timings' in e.json)));
  for (const k of ['queue_ms', 'prefill_ms', 'decode_ms', 'total_ms', 'cached_tokens', 'preemptions', 'predicted_ttft_ms']) {
    assert.ok(k in last.timings, `timings.${k}`);
  }
  assert.ok(last.usage.completion_tokens >= 1 && last.usage.completion_tokens <= 4);
  const rec = await slo.logRecordFor(last.id);
  assert.ok(Math.abs(rec.prefill_ms - last.timings.prefill_ms) < 1e-6);
});

// ---- Response cache ---------------------------------------------------------------------------

test('response cache: same deterministic request -> same choices, second a hit; any change -> miss', async () => {
  const body = chat('cache me', { max_tokens: 12 });
  const first = await cached.post('/v1/chat/completions', body);
  const second = await cached.post('/v1/chat/completions', body);
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('x-qwenserve-cache'), 'miss');
  assert.equal(second.headers.get('x-qwenserve-cache'), 'hit');
  assert.deepEqual(second.json.choices, first.json.choices);
  assert.deepEqual(second.json.usage, first.json.usage);
  // Streamed as SSE too, with the same text.
  const streamed = await cached.stream('/v1/chat/completions', { ...body, stream: true });
  assert.equal(streamed.headers.get('x-qwenserve-cache'), 'hit');
  assert.deepEqual(streamed.errors, []);
  const text = streamed.events.filter((e) => e.json).map((e) => e.json.choices[0]?.delta?.content ?? '').join('');
  assert.equal(text, first.json.choices[0].message.content ?? '');
  for (const change of [{ max_tokens: 11 }, { stop: ['zz'] }, { top_p: 0.9 }, { seed: 4 }]) {
    const r = await cached.post('/v1/chat/completions', { ...body, ...change });
    assert.equal(r.headers.get('x-qwenserve-cache'), 'miss', JSON.stringify(change));
  }
  const bypass = await cached.post('/v1/chat/completions', { ...body, cache: false });
  assert.equal(bypass.headers.get('x-qwenserve-cache'), 'bypass');
  // Sampled without a seed: never cached (no header at all), however often it is sent.
  for (let i = 0; i < 2; i++) {
    const r = await cached.post('/v1/chat/completions', chat('random', { max_tokens: 4, temperature: 0.8 }));
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-qwenserve-cache'), null);
  }
  // With a seed it is deterministic.
  const seeded = chat('seeded', { max_tokens: 6, temperature: 0.8, seed: 11 });
  const s1 = await cached.post('/v1/chat/completions', seeded);
  const s2 = await cached.post('/v1/chat/completions', seeded);
  assert.equal(s2.headers.get('x-qwenserve-cache'), 'hit');
  assert.deepEqual(s2.json.choices, s1.json.choices);
  const { values } = await cached.metrics();
  assert.equal(values.get('qwenserve_response_cache_requests_total{result="hit"}'), 3);
  assert.equal(values.get('qwenserve_response_cache_requests_total{result="bypass"}'), 1);
});

test('response cache memory stays within --response-cache-size', async () => {
  for (let i = 0; i < 40; i++) {
    const r = await cached.post('/v1/completions', { prompt: words(20, i), max_tokens: 48, temperature: 0 });
    assert.equal(r.status, 200, r.text);
  }
  const { values } = await cached.metrics();
  const bytes = values.get('qwenserve_response_cache_bytes');
  assert.ok(bytes > 0 && bytes <= 16 * 1024, `cache bytes ${bytes}`);
});

test('--response-cache-size with a non-numeric size or below 4KiB is refused at startup', async () => {
  await assert.rejects(startServer(['--response-cache-size', 'lots']), /--response-cache-size: invalid byte size/);
  // A number without its unit is bytes: 64 bytes would cache nothing, silently.
  await assert.rejects(startServer(['--response-cache-size', '64']), /--response-cache-size: 64 bytes cannot hold a cached response/);
});

// ---- Degradation ------------------------------------------------------------------------------

// The threshold is read from the engine's published stats (KV use is published after each step),
// so the test waits on that state, never on a fixed sleep: it once waited 200 ms after the long
// stream ended for the engine to publish the freed KV, which a loaded 2-core machine (load average
// above 10 with other builds) need not grant the engine thread. The long stream is cancelled by
// hanging up once it has served its purpose (a 2000-token run took 25-35 s on that machine).
test('degradation: above the threshold the default max_tokens shrinks and the header appears; below, not', async () => {
  const idle = await degrade.post('/v1/completions', { prompt: 'one two', temperature: 0 });
  assert.equal(idle.status, 200);
  assert.equal(idle.headers.get('x-qwenserve-degraded'), null);
  assert.equal((await degrade.logRecordFor(idle.json.id)).max_tokens, 40);
  // Keep a long stream running (KV in use), then ask without max_tokens.
  let hangUp = null;
  const long = degrade.stream('/v1/completions', {
    prompt: 'a b c', max_tokens: 2000, temperature: 0, stream: true,
    logit_bias: { 151643: -100, 151645: -100 },  // no <|endoftext|> / <|im_end|>: runs all 2000 tokens
  }, { onEvent: (_event, ctl) => { hangUp ??= ctl.abort; } });
  // Wait until it runs (its first text may come late: padding ids have none).
  let stats;
  // kv_cache_usage, not running: the engine publishes running before the step, KV use after it.
  for (let i = 0; i < 400 && !((stats = (await degrade.get('/stats')).json)?.kv_cache_usage > 0); i++) await sleep(25);
  const busy = await degrade.post('/v1/completions', { prompt: 'one two', temperature: 0 });
  const explicit = await degrade.post('/v1/completions', { prompt: 'one two', temperature: 0, max_tokens: 5 });
  if (hangUp) hangUp();  // the server cancels the stream at its next write; else it runs to its end
  const longResult = await long;
  assert.equal(busy.headers.get('x-qwenserve-degraded'), '1',
    `stats ${JSON.stringify({ running: stats?.running, kv: stats?.kv_cache_usage })}, long: ${longResult.status} ${longResult.events.length} events ${longResult.text.slice(-300)}`);
  const rec = await degrade.logRecordFor(busy.json.id);
  assert.equal(rec.max_tokens, 3);
  assert.equal(rec.degraded, true);
  assert.ok(busy.json.usage.completion_tokens <= 3);
  assert.equal((await degrade.logRecordFor(explicit.json.id)).max_tokens, 5);  // explicit: kept
  // Below the threshold once the engine has published that the long stream's KV is free.
  for (let i = 0; i < 400 && ((stats = (await degrade.get('/stats')).json)?.kv_cache_usage > 0); i++) await sleep(25);
  assert.equal(stats?.kv_cache_usage, 0, 'the cancelled stream released its KV blocks');
  const after = await degrade.post('/v1/completions', { prompt: 'one two', temperature: 0 });
  assert.equal(after.headers.get('x-qwenserve-degraded'), null);
  const { values } = await degrade.metrics();
  assert.ok(values.get('qwenserve_degraded_requests_total') >= 2);
});
