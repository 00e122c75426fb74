// End-to-end tests of admission control, timeouts, the KV budget and the prefix cache of
// `qwenserve serve` on the tiny random-weight test model.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/admission.test.mjs
// Env: see server_harness.mjs (QS_BIN, QS_WORK_DIR, QS_TOKENIZER_DIR).
//
// Servers: `overload` (--max-queue 4 --max-num-seqs 2), `queueWait` (--max-num-seqs 1
// --max-queue-wait 0.3), `small` (--no-prefix-cache --kv-cache-memory 1MiB) and `tight`
// (--kv-cache-memory 96KiB: 12 blocks of the tiny model, 192 tokens, for 8 sequences).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, makeTinyModel, cleanWorkDir } from './server_harness.mjs';

let overload;
let queueWait;
let small;
let tight;

before(async () => {
  await makeTinyModel();
  [overload, queueWait, small, tight] = await Promise.all([
    startServer(['--max-queue', '4', '--max-num-seqs', '2', '--log-format', 'json']),
    startServer(['--max-num-seqs', '1', '--max-queue-wait', '0.3']),
    startServer(['--no-prefix-cache', '--kv-cache-memory', '1MiB', '--log-format', 'json']),
    // --prefill-slack 0: prefill chunks of the full step budget whatever the measured step times,
    // so the 6 concurrent requests are admitted together and preemption is certain.
    startServer(['--kv-cache-memory', '96KiB', '--max-num-seqs', '8', '--prefill-slack', '0', '--log-format', 'json']),
  ]);
});

after(async () => {
  for (const s of [overload, queueWait, small, tight]) if (s && !s.exit) await s.stop();
  cleanWorkDir();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const chat = (content, extra = {}) => ({
  model: 'qwenserve', messages: [{ role: 'user', content }], temperature: 0, ...extra,
});

function assertRejection(res, status, code) {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${res.text}`);
  const retry = res.headers.get('retry-after');
  assert.ok(retry !== null && Number(retry) >= 1, `Retry-After header: ${retry}`);
  const e = res.json?.error;
  assert.ok(e && typeof e.message === 'string' && e.message.length > 0, `OpenAI error body: ${res.text}`);
  assert.ok('type' in e && 'param' in e && 'code' in e, `error has type/param/code: ${res.text}`);
  if (code) assert.equal(e.code, code, res.text);
}

// Sends every body at once over connections opened beforehand (so the timing is the server's, not
// the client's connection setup) and reads each complete response (Connection: close).
// Returns [{status, headers (Map, lower-case names), text (body), firstByteMs}].
async function rawBurst(server, bodies) {
  const socks = await Promise.all(bodies.map(() => new Promise((resolve, reject) => {
    const s = net.connect(server.port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  })));
  const t0 = performance.now();
  return Promise.all(socks.map((s, i) => new Promise((resolve, reject) => {
    const chunks = [];
    let firstByteMs = null;
    s.on('data', (d) => {
      if (firstByteMs === null) firstByteMs = performance.now() - t0;
      chunks.push(d);
    });
    s.on('end', () => resolve({ firstByteMs, ...parseHttpResponse(Buffer.concat(chunks)) }));
    s.on('error', reject);
    const body = JSON.stringify(bodies[i]);
    s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  })));
}

function parseHttpResponse(buf) {
  const head = buf.indexOf('\r\n\r\n');
  const lines = buf.subarray(0, head).toString('latin1').split('\r\n');
  const status = Number(lines[0].split(' ')[1]);
  const headers = new Map(lines.slice(1).map((l) => {
    const k = l.indexOf(':');
    return [l.slice(0, k).toLowerCase(), l.slice(k + 1).trim()];
  }));
  let body = buf.subarray(head + 4);
  if ((headers.get('transfer-encoding') || '').includes('chunked')) {
    const parts = [];
    let pos = 0;
    for (;;) {
      const eol = body.indexOf('\r\n', pos);
      const size = parseInt(body.subarray(pos, eol).toString('latin1'), 16);
      if (!size) break;
      parts.push(body.subarray(eol + 2, eol + 2 + size));
      pos = eol + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  }
  const text = body.toString('utf8');
  let json;
  try { json = JSON.parse(text); } catch { /* SSE or not JSON */ }
  return { status, headers, text, json, get: (name) => headers.get(name) };
}

// Content of a chat response: the message (JSON) or the concatenated deltas (SSE, ending [DONE]).
function chatText(res) {
  if (res.json) return res.json.choices[0].message.content;
  const events = res.text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
  assert.equal(events.at(-1), '[DONE]', res.text.slice(-300));
  return events.slice(0, -1).map((d) => JSON.parse(d).choices?.[0]?.delta?.content ?? '').join('');
}

test('overload: --max-queue 4 and 32 simultaneous requests; the excess get 429 + Retry-After within 50 ms', async (t) => {
  const N = 32;
  const content = (i) => `Request number ${i}: tell me a story.`;
  const bodies = Array.from({ length: N }, (_, i) => chat(content(i), { max_tokens: 48, stream: i % 2 === 1 }));
  const results = await rawBurst(overload, bodies);
  const ok = [];
  const rejected = [];
  results.forEach((r, i) => (r.status === 200 ? ok : rejected).push({ i, res: r }));
  t.diagnostic(`200: ${ok.length}, 429: ${rejected.length}; first byte of the 429s (ms): ` +
               rejected.map((r) => r.res.firstByteMs.toFixed(1)).join(' '));
  // A queue place is reserved on arrival, before the engine admits anything: at least the 4
  // queue places are granted (up to 2 more if the engine starts some meanwhile), the rest rejected.
  assert.ok(ok.length >= 4 && ok.length <= 10, `${ok.length} admitted`);
  assert.ok(rejected.length >= N / 2, `${rejected.length} rejected`);
  for (const { i, res } of rejected) {
    assert.equal(res.status, 429, `request ${i}: ${res.text}`);
    assertRejection({ ...res, headers: { get: res.get } }, 429, 'queue_full');
    assert.ok(res.firstByteMs < 50, `request ${i} answered after ${res.firstByteMs.toFixed(1)} ms (limit 50)`);
  }
  // Every admitted request completed with exactly the tokens it produces alone (on the server
  // without a prefix cache).
  for (const { i, res } of ok) {
    const solo = await small.post('/v1/chat/completions', chat(content(i), { max_tokens: 48 }));
    assert.equal(solo.status, 200, solo.text);
    assert.equal(chatText(res), solo.json.choices[0].message.content, `request ${i} equals its solo run`);
  }
  const m = (await overload.metrics()).values;
  assert.equal(m.get('qwenserve_admission_rejections_total'), rejected.length);
  assert.equal(m.get('qwenserve_http_requests_total{status="429"}'), rejected.length);
  assert.equal(m.get('qwenserve_num_requests_running'), 0);
  assert.equal(m.get('qwenserve_num_requests_waiting'), 0);
});

test('prefix cache: turn 2 reuses turn 1 and prefills only the new tokens', async () => {
  const m0 = (await overload.metrics()).values;
  const messages = [
    { role: 'system', content: 'You are a helpful assistant that answers in detail.' },
    { role: 'user', content: 'Explain, step by step, how a hash table handles collisions and resizing.' },
  ];
  const first = await overload.post('/v1/chat/completions', { model: 'qwenserve', messages, temperature: 0, max_tokens: 20 });
  assert.equal(first.status, 200, first.text);
  const p1 = first.json.usage.prompt_tokens;
  messages.push({ role: 'assistant', content: first.json.choices[0].message.content });
  messages.push({ role: 'user', content: 'And with open addressing?' });
  const second = await overload.post('/v1/chat/completions', { model: 'qwenserve', messages, temperature: 0, max_tokens: 20 });
  assert.equal(second.status, 200, second.text);
  const cached = second.json.usage.prompt_tokens_details?.cached_tokens;
  assert.ok(cached >= Math.floor(p1 / 16) * 16, `cached_tokens ${cached} >= turn 1 prompt ${p1} in whole blocks`);
  assert.equal(cached % 16, 0, 'whole blocks');
  assert.ok(cached < second.json.usage.prompt_tokens, 'at least one token computed');
  const rec = await overload.logRecordFor(second.json.id);
  assert.equal(rec.cached_tokens, cached);
  assert.equal(rec.prefill_computed_tokens, second.json.usage.prompt_tokens - cached, 'prefill work = new tokens only');
  // Same output as a server without the prefix cache.
  const ref = await small.post('/v1/chat/completions', { model: 'qwenserve', messages, temperature: 0, max_tokens: 20 });
  assert.equal(ref.status, 200, ref.text);
  assert.equal(ref.json.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(second.json.choices[0].message.content, ref.json.choices[0].message.content);
  const m1 = (await overload.metrics()).values;
  const d = (k) => m1.get(k) - (m0.get(k) ?? 0);
  assert.equal(d('qwenserve_prefix_cache_queries_total'), p1 + second.json.usage.prompt_tokens);
  assert.equal(d('qwenserve_prefix_cache_hits_total'), (first.json.usage.prompt_tokens_details.cached_tokens) + cached);
});

test('--max-queue-wait: a stream that cannot start in time gets 429, never a 200', async () => {
  let startB;
  const aRunning = new Promise((resolve) => { startB = resolve; });
  // Temperature 1 with a seed: random-weight greedy output tends to loop and would trip the
  // degenerate-output guard long before 1500 tokens.
  const a = queueWait.stream('/v1/chat/completions', chat('long one', { max_tokens: 1500, stream: true, temperature: 1, seed: 3 }), {
    onEvent: (ev, ctl) => { if (ev.json?.choices?.[0]?.delta?.content) { startB(); setTimeout(() => ctl.abort(), 1500); } },
  });
  await aRunning;
  const t0 = performance.now();
  const b = await queueWait.stream('/v1/chat/completions', chat('short one', { max_tokens: 4, stream: true }));
  const waited = performance.now() - t0;
  assertRejection(b, 429, 'queue_timeout');
  assert.ok(waited >= 250, `rejected after waiting ${waited.toFixed(0)} ms`);
  await a;
  const m = (await queueWait.metrics()).values;
  assert.equal(m.get('qwenserve_admission_rejections_total'), 1);
});

test('timeout: the body field ends a generation (408, or an SSE error when streaming)', async () => {
  const res = await small.post('/v1/chat/completions', chat('time me out', { max_tokens: 1000, timeout: 0.05 }));
  assert.equal(res.status, 408, res.text);
  assert.equal(res.json.error.code, 'request_timeout');
  const s = await small.stream('/v1/chat/completions', chat('time me out', { max_tokens: 1000, timeout: 0.05, stream: true }));
  assert.equal(s.status, 200);
  const err = s.events.find((e) => e.json?.error);
  assert.ok(err, `an SSE error event: ${s.text.slice(0, 500)}`);
  assert.equal(err.json.error.code, 'request_timeout');
  const bad = await small.post('/v1/chat/completions', chat('x', { timeout: -1 }));
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, 'timeout');
  // The same field on the translated routes, answered in their own error shapes (Anthropic: 408
  // timeout_error; OpenAI Responses: the chat error shape).
  const messages = await small.post('/v1/messages', {
    max_tokens: 1000, messages: [{ role: 'user', content: 'time me out' }], timeout: 0.05 });
  assert.equal(messages.status, 408, messages.text);
  assert.equal(messages.json?.type, 'error', messages.text);
  assert.equal(messages.json?.error?.type, 'timeout_error', messages.text);
  const responses = await small.post('/v1/responses', { input: 'time me out', max_output_tokens: 1000, timeout: 0.05 });
  assert.equal(responses.status, 408, responses.text);
  assert.equal(responses.json?.error?.code, 'request_timeout', responses.text);
});

test('stream_options on a non-streaming request is a 400 naming it (OpenAI, vLLM)', async () => {
  const res = await small.post('/v1/chat/completions', chat('x', { max_tokens: 2, stream_options: { include_usage: true } }));
  assert.equal(res.status, 400, res.text);
  assert.equal(res.json?.error?.param, 'stream_options', res.text);
  const ok = await small.post('/v1/chat/completions', chat('x', { max_tokens: 2, stream_options: null }));
  assert.equal(ok.status, 200, ok.text);
});

test('a request larger than the KV cache gets 400 naming both numbers; nothing leaks', async () => {
  const blocks = Number(/KV (\d+) blocks/.exec(small.stderr)?.[1]);
  assert.ok(blocks > 0, `KV block count in the startup line: ${small.stderr}`);
  const kvTokens = blocks * 16;
  const res = await small.post('/v1/chat/completions', chat('hello', { max_tokens: kvTokens }));
  assert.equal(res.status, 400, res.text);
  assert.ok(res.json.error.message.includes(String(kvTokens)), res.json.error.message);
  assert.ok(res.json.error.message.includes(String(kvTokens)) && /\d+ prompt tokens/.test(res.json.error.message), res.json.error.message);
  const models = await small.get('/v1/models');
  assert.equal(models.json.data[0].max_model_len, kvTokens, 'max_model_len is capped by the KV cache');
  // The gauges are published after each engine step: a request of the previous test (a stream
  // cut by its timeout) may retire a step after its client saw the end, so wait for them to settle.
  let stats;
  let m;
  for (let i = 0; i < 100; i++) {
    stats = (await small.get('/stats')).json;
    m = (await small.metrics()).values;
    if (stats.kv_blocks.referenced === 0 && m.get('qwenserve_num_requests_running') === 0) break;
    await sleep(20);
  }
  assert.equal(stats.kv_blocks.referenced, 0, JSON.stringify(stats.kv_blocks));
  assert.equal(m.get('qwenserve_num_requests_running'), 0);
});

test('preemption: concurrent requests beyond a tiny KV budget all complete with their solo output', async () => {
  const stderrBlocks = Number(/KV (\d+) blocks/.exec(tight.stderr)?.[1]);
  assert.equal(stderrBlocks, 12, tight.stderr);
  const bodies = Array.from({ length: 6 }, (_, i) => chat(`Preempt me, number ${i}, please.`, { max_tokens: 60, stream: i % 2 === 0 }));
  const results = await Promise.all(bodies.map((b) => (b.stream ? tight.stream('/v1/chat/completions', b)
                                                                 : tight.post('/v1/chat/completions', b))));
  const stats = (await tight.get('/stats')).json;
  assert.ok(stats.preemptions > 0, `the budget forced preemptions: ${JSON.stringify(stats)}`);
  for (let i = 0; i < bodies.length; i++) {
    const r = results[i];
    assert.equal(r.status, 200, r.text);
    const text = bodies[i].stream
      ? r.events.map((e) => e.json?.choices?.[0]?.delta?.content ?? '').join('')
      : r.json.choices[0].message.content;
    const solo = await small.post('/v1/chat/completions', { ...bodies[i], stream: false });
    assert.equal(text, solo.json.choices[0].message.content, `request ${i} equals its solo run`);
  }
  await sleep(50);
  const after = (await tight.get('/stats')).json;
  assert.equal(after.kv_blocks.referenced, 0, JSON.stringify(after.kv_blocks));
  const m = (await tight.metrics()).values;
  assert.equal(m.get('qwenserve_num_preemptions_total'), after.preemptions);
});

test('a stream whose text the encoder holds back still times its tokens as they are generated', async () => {
  // logit_bias forces "\n" (token 198 of Qwen3's vocabulary) at every step: leading whitespace is
  // held while it may still precede <think>, then sent with a later token.
  // 4 newlines: all of them held to the end of the stream (they could precede <think>).
  const body = chat('hi', { max_tokens: 4, stream: true, logit_bias: { 198: 100 }, stream_options: { include_usage: true } });
  const s = await small.stream('/v1/chat/completions', body);
  assert.equal(s.status, 200);
  const text = s.events.map((e) => e.json?.choices?.[0]?.delta?.content ?? '').join('');
  assert.equal(text, '\n'.repeat(4));
  const id = s.events.find((e) => e.json?.id)?.json.id;
  const rec = await small.logRecordFor(id);
  assert.ok(rec, 'log line');
  assert.equal(rec.completion_tokens, 4);
  // TTFT at the first token, 3 intervals after it (not one instant at the last chunk).
  assert.ok(rec.itl_ms_mean !== null && rec.itl_ms_mean > 0, JSON.stringify(rec));
  assert.ok(rec.decode_ms > 0 && rec.ttft_ms < rec.e2e_ms, JSON.stringify(rec));
});

test('X-Request-Id: echoed as x-request-id and logged as request_id; an unusable one is ignored', async () => {
  const traced = await small.post('/v1/chat/completions', chat('trace me', { max_tokens: 2 }),
                                  { headers: { 'X-Request-Id': 'gw-trace-42:a.b' } });
  assert.equal(traced.status, 200, traced.text);
  assert.equal(traced.headers.get('x-request-id'), 'gw-trace-42:a.b');
  assert.match(traced.json.id, /^chatcmpl-/, 'the response id stays the server\'s own');
  const rec = await small.logRecordFor(traced.json.id);
  assert.equal(rec.request_id, 'gw-trace-42:a.b', JSON.stringify(rec));
  // On a translated route too (the header is read before the request is translated).
  const messages = await small.post('/v1/messages', { max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] },
                                    { headers: { 'X-Request-Id': 'anthropic-side' } });
  assert.equal(messages.status, 200, messages.text);
  assert.equal(messages.headers.get('x-request-id'), 'anthropic-side');
  // 129 characters: ignored, the response id is used and nothing is logged for it.
  const long = await small.post('/v1/chat/completions', chat('trace me', { max_tokens: 2 }),
                                { headers: { 'X-Request-Id': 'x'.repeat(129) } });
  assert.equal(long.status, 200, long.text);
  assert.equal(long.headers.get('x-request-id'), long.json.id);
  assert.equal((await small.logRecordFor(long.json.id)).request_id, null);
  // Without one, a translated route's x-request-id is its own response id (msg_ / resp_, as in the
  // body), and the log line carries that id.
  const msg = await small.post('/v1/messages', { max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(msg.status, 200, msg.text);
  assert.match(msg.json.id, /^msg_/);
  assert.equal(msg.headers.get('x-request-id'), msg.json.id);
  assert.equal(msg.headers.get('request-id'), msg.json.id, 'the header Anthropic\'s SDKs read');
  assert.ok(await small.logRecordFor(msg.json.id), 'the log line has the msg_ id');
  const resp = await small.post('/v1/responses', { max_output_tokens: 2, input: 'hi' });
  assert.equal(resp.status, 200, resp.text);
  assert.match(resp.json.id, /^resp_/);
  assert.equal(resp.headers.get('x-request-id'), resp.json.id);
  assert.ok(await small.logRecordFor(resp.json.id), 'the log line has the resp_ id');
  // Answers that never reach the engine echo it too, and their log line carries it.
  const cases = [
    ['GET', '/v1/no-such-route', undefined, 404],
    ['POST', '/v1/chat/completions', '{"messages": [', 400],
    ['POST', '/v1/messages', '{"max_tokens": "two"}', 400],
    ['GET', '/v1/chat/completions', undefined, 405],
    ['GET', '/v1/messages/nope', undefined, 404, 'not_found_error'],  // logged as the client saw it
  ];
  for (const [i, [method, route, rawBody, status, errorType]] of cases.entries()) {
    const id = `rejected-${i}`;
    const r = await small.request(method, route, { rawBody, headers: { 'X-Request-Id': id, 'Content-Type': 'application/json' } });
    assert.equal(r.status, status, `${method} ${route}: ${r.text}`);
    assert.equal(r.headers.get('x-request-id'), id, `${method} ${route}`);
    const deadline = Date.now() + 3000;
    let line;
    const find = () => small.stderrLines().map((l) => { try { return JSON.parse(l); } catch { return null; } })
      .find((rec) => rec?.request_id === id);
    while (!(line = find()) && Date.now() < deadline) await sleep(20);
    assert.ok(line, `a log line with request_id ${id}`);
    assert.equal(line.status, status);
    assert.equal(line.id, null);
    if (errorType) {
      assert.equal(line.error_type, errorType);
      assert.equal(r.json.error.type, errorType);
    }
  }
  const health = await small.request('GET', '/health', { headers: { 'X-Request-Id': 'probe-1' } });
  assert.equal(health.headers.get('x-request-id'), 'probe-1');
});
