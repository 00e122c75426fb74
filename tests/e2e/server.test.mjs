// End-to-end tests of `qwenserve serve` through HTTP, the official `openai` client and a strict
// SSE parser (eventsource-parser), on the tiny random-weight test model (real Qwen3 tokenizer and
// chat template; gibberish but deterministic text at temperature 0 or with a seed).
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/
// Env: see server_harness.mjs (QS_BIN, QS_WORK_DIR, QS_TOKENIZER_DIR).
//
// Three servers: `main` (most cases, served name "tiny-e2e"), `auth` (--api-key) and `limits`
// (--ctx-size 256 --max-body-bytes 4096 --max-num-seqs 1 --keepalive 0.1). Cases on `main` run in
// order; the /metrics and /stats cases check totals against this file's tally of what the
// earlier cases sent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, makeTinyModel, cleanWorkDir } from './server_harness.mjs';

const SERVED = 'tiny-e2e';
const API_KEY = 'sk-e2e-secret';
const CTX = 4096;

let main; // Server
let auth;
let limits;
let client; // OpenAI client for main

// Tallies of what was sent to `main`, for the /metrics and /stats cases.
const tally = { generationOk: 0, status400: 0 };
// Response ids of requests with n > 1 (their log line's queue_ms is the slowest choice's).
const multiChoiceIds = new Set();

const MESSAGES = [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: 'Name three colours, please. 你好 🙂' },
];

before(async () => {
  await makeTinyModel();
  // --no-output-guard: greedy output of the random-weight model loops, and these cases count on
  // generations running to max_tokens (the guard has its own tests).
  [main, auth, limits] = await Promise.all([
    startServer(['--served-model-name', SERVED, '--ctx-size', String(CTX), '--log-format', 'json', '--no-output-guard']),
    startServer(['--api-key', API_KEY, '--no-output-guard']),
    startServer(['--ctx-size', '256', '--max-body-bytes', '4096', '--max-num-seqs', '1', '--keepalive', '0.1',
                 '--no-output-guard']),
  ]);
  client = new OpenAI({ baseURL: main.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
});

after(async () => {
  for (const s of [main, auth, limits]) if (s && !s.exit) await s.stop();
  cleanWorkDir();
});

// ---- helpers ------------------------------------------------------------------------------------

function assertError(res, status, param) {
  assert.equal(res.status, status, `expected HTTP ${status}, got ${res.status}: ${res.text}`);
  assert.ok(res.json && typeof res.json.error === 'object' && res.json.error !== null,
    `error body must be {"error": {...}}, got ${res.text}`);
  const e = res.json.error;
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0, 'error.message is empty');
  assert.equal(typeof e.type, 'string');
  assert.ok('param' in e, 'error.param missing');
  assert.ok('code' in e, 'error.code missing');
  if (param !== undefined) assert.equal(e.param, param, `error.param for ${res.text}`);
  return e;
}

/** POST to main expecting 400 naming `param`; counts it in the tally. */
async function expect400(route, body, param, opts = {}) {
  const res = await main.post(route, body, opts);
  tally.status400 += res.status === 400 ? 1 : 0;
  return assertError(res, 400, param);
}

async function tokenizeMessages(server, messages) {
  const res = await server.post('/tokenize', { messages });
  assert.equal(res.status, 200, res.text);
  return res.json;
}

async function tokenizePrompt(server, prompt) {
  const res = await server.post('/tokenize', { prompt });
  assert.equal(res.status, 200, res.text);
  return res.json;
}

async function detokenize(server, tokens) {
  const res = await main.post('/detokenize', { tokens });
  assert.equal(res.status, 200, res.text);
  assert.equal(typeof res.json.prompt, 'string');
  return res.json.prompt;
}

/** Streams a chat request on main and checks the chunk protocol; returns {text, chunks, usage, finish}. */
async function streamChat(body, { expectUsage = false } = {}) {
  const r = await main.stream('/v1/chat/completions', { model: SERVED, ...body, stream: true });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.errors, [], 'SSE stream violations');
  assert.ok(r.events.length >= 3, `too few events: ${r.text}`);
  const last = r.events[r.events.length - 1];
  assert.equal(last.data, '[DONE]', '[DONE] must be the last event');
  assert.equal(r.events.filter((e) => e.data === '[DONE]').length, 1, '[DONE] exactly once');
  const chunks = r.events.slice(0, -1).map((e) => e.json);
  const id = chunks[0].id;
  for (const c of chunks) {
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.id, id, 'every chunk has the same id');
    assert.equal(c.model, SERVED);
    assert.equal(typeof c.created, 'number');
    assert.ok(Array.isArray(c.choices));
  }
  // First chunk: the role.
  assert.equal(chunks[0].choices.length, 1);
  assert.equal(chunks[0].choices[0].index, 0);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant', `first chunk: ${JSON.stringify(chunks[0])}`);
  let usage = null;
  let finish = null;
  let finishAt = -1;
  const deltas = [];
  chunks.forEach((c, i) => {
    if (c.usage) {
      assert.equal(usage, null, 'one usage chunk');
      assert.deepEqual(c.choices, [], 'usage chunk has no choices');
      assert.equal(i, chunks.length - 1, 'usage chunk is the last before [DONE]');
      usage = c.usage;
      return;
    }
    assert.equal(c.choices.length, 1, JSON.stringify(c));
    const ch = c.choices[0];
    if (typeof ch.delta?.content === 'string' && ch.delta.content.length) {
      assert.equal(finish, null, 'no content after the finish chunk');
      deltas.push(ch.delta.content);
    }
    if (ch.finish_reason) {
      assert.equal(finish, null, 'one finish chunk');
      finish = ch.finish_reason;
      finishAt = i;
    }
  });
  assert.ok(finish, 'a chunk with finish_reason');
  assert.ok(finishAt >= 1);
  if (expectUsage) {
    assert.ok(usage, 'usage chunk with stream_options.include_usage');
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  } else {
    assert.equal(usage, null, 'no usage chunk without include_usage');
  }
  return { text: deltas.join(''), deltas, chunks, usage, finish, comments: r.comments };
}

/** numpy.percentile(samples, p) (method "linear"). */
function percentile(samples, p) {
  const x = [...samples].sort((a, b) => a - b);
  if (x.length === 0) return null;
  const h = (p / 100) * (x.length - 1);
  const i = Math.floor(h);
  const g = h - i;
  if (i >= x.length - 1) return x[x.length - 1];
  return x[i] + g * (x[i + 1] - x[i]);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const codePoints = (s) => Array.from(s);

// ---- cases on main --------------------------------------------------------------------------------

test('GET /health, /ready and /v1/models list the served name', async () => {
  assert.equal((await main.get('/health')).status, 200);
  assert.equal((await main.get('/ready')).status, 200);
  const res = await main.get('/v1/models');
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.object, 'list');
  assert.ok(res.json.data.some((m) => m.id === SERVED && m.object === 'model'), res.text);
  // created: a Unix time in seconds (OpenAI's model object), not 0; the server started this hour.
  const now = Date.now() / 1000;
  for (const m of res.json.data) assert.ok(m.created > now - 3600 && m.created <= now + 1, res.text);
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  assert.deepEqual(models, [SERVED]);
  const root = await main.get('/');
  assert.equal(root.status, 200);
  assert.match(root.headers.get('content-type') || '', /text\/html/);
});

let chatText; // temperature-0 reply to MESSAGES (max_tokens 24)

test('non-streaming chat: shape, usage matches /tokenize and the generated tokens', async () => {
  const tok = await tokenizeMessages(main, MESSAGES);
  assert.ok(Array.isArray(tok.tokens) && tok.tokens.length > 10, JSON.stringify(tok));
  assert.equal(tok.count, tok.tokens.length);
  assert.equal(tok.max_model_len, CTX);

  const r = await client.chat.completions.create({ model: SERVED, messages: MESSAGES, temperature: 0, max_tokens: 24 });
  tally.generationOk++;
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, SERVED);
  assert.equal(typeof r.created, 'number');
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
  assert.equal(r.usage.prompt_tokens, tok.count, 'usage.prompt_tokens equals /tokenize count');
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 24);
  chatText = c.message.content;

  // The same request with logprobs lists every generated token: completion_tokens is that count.
  const lp = await main.post('/v1/chat/completions',
    { model: SERVED, messages: MESSAGES, temperature: 0, max_tokens: 24, logprobs: true });
  assert.equal(lp.status, 200, lp.text);
  tally.generationOk++;
  assert.equal(lp.json.choices[0].message.content, chatText, 'logprobs do not change the text');
  assert.equal(lp.json.choices[0].logprobs.content.length, lp.json.usage.completion_tokens);
  assert.equal(lp.json.usage.completion_tokens, r.usage.completion_tokens);

  // /v1/completions on the rendered chat prompt's token ids gives the same text (temperature 0).
  const comp = await main.post('/v1/completions', { model: SERVED, prompt: tok.tokens, temperature: 0, max_tokens: 24 });
  assert.equal(comp.status, 200, comp.text);
  tally.generationOk++;
  assert.equal(comp.json.choices[0].text, chatText, 'chat == completion on the templated prompt ids');
  assert.equal(comp.json.usage.prompt_tokens, tok.count);
});

test('streaming chat: role chunk, deltas equal the non-streaming text, finish, usage, [DONE]', async (t) => {
  assert.ok(chatText !== undefined, 'needs the non-streaming case');
  const s = await streamChat({ messages: MESSAGES, temperature: 0, max_tokens: 24, stream_options: { include_usage: true } },
    { expectUsage: true });
  tally.generationOk++;
  assert.equal(s.text, chatText, 'concatenated deltas equal the non-streaming content');
  const tok = await tokenizeMessages(main, MESSAGES);
  assert.equal(s.usage.prompt_tokens, tok.count);
  if (s.finish === 'length') assert.equal(s.usage.completion_tokens, 24);

  // Without include_usage: no usage chunk; a longer multilingual reply (partial UTF-8 tokens).
  const s2 = await streamChat({
    messages: [{ role: 'user', content: '用中文写一首关于大海的诗 🌊🐳 und auf Deutsch: Größe, Übermaß' }],
    temperature: 1, seed: 5, max_tokens: 96,
  });
  tally.generationOk++;
  // The same seed without streaming gives the same text.
  const ns = await main.post('/v1/chat/completions', {
    model: SERVED, messages: [{ role: 'user', content: '用中文写一首关于大海的诗 🌊🐳 und auf Deutsch: Größe, Übermaß' }],
    temperature: 1, seed: 5, max_tokens: 96,
  });
  assert.equal(ns.status, 200, ns.text);
  tally.generationOk++;
  // Equal to the text decoded in one piece: no character was split at a chunk boundary. (A
  // random-weight model may still sample an invalid byte sequence, which both paths decode to
  // U+FFFD, as Hugging Face's errors='replace' does.)
  assert.equal(s2.text, ns.json.choices[0].message.content);
  const nonAscii = s2.text.replace(/[\x00-\x7f]/g, '').length;
  t.diagnostic(`multilingual stream: ${s2.deltas.length} deltas, ${nonAscii} non-ASCII characters`);
});

test('streaming through the openai client', async () => {
  const stream = await client.chat.completions.create({
    model: SERVED, messages: MESSAGES, temperature: 0, max_tokens: 24, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  tally.generationOk++;
  assert.equal(text, chatText);
  assert.ok(finish);
  assert.ok(usage && usage.completion_tokens > 0);
});

test('completions: string prompt and token-id prompt', async () => {
  const prompt = 'The quick brown fox jumps over';
  const r = await client.completions.create({ model: SERVED, prompt, temperature: 0, max_tokens: 12 });
  tally.generationOk++;
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.object, 'text_completion');
  assert.equal(r.model, SERVED);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].index, 0);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  const tok = await tokenizePrompt(main, prompt);
  assert.equal(r.usage.prompt_tokens, tok.count);
  assert.equal(await detokenize(main, tok.tokens), prompt, 'detokenize(tokenize(p)) == p');

  const r2 = await client.completions.create({ model: SERVED, prompt: tok.tokens, temperature: 0, max_tokens: 12 });
  tally.generationOk++;
  assert.equal(r2.choices[0].text, r.choices[0].text, 'token-id prompt gives the same text');
  assert.equal(r2.usage.prompt_tokens, tok.count);
  assert.equal(r2.usage.completion_tokens, r.usage.completion_tokens);

  // Streaming completion: text_completion chunks whose text concatenates to the same output.
  const s = await main.stream('/v1/completions', { model: SERVED, prompt, temperature: 0, max_tokens: 12, stream: true });
  tally.generationOk++;
  assert.equal(s.status, 200, s.text);
  assert.deepEqual(s.errors, []);
  assert.equal(s.events.at(-1).data, '[DONE]');
  const chunks = s.events.slice(0, -1).map((e) => e.json);
  for (const c of chunks) assert.equal(c.object, 'text_completion');
  assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), r.choices[0].text);
  assert.ok(chunks.some((c) => c.choices[0]?.finish_reason));
});

test('n=2 gives two choices with index 0 and 1', async () => {
  const r = await main.post('/v1/chat/completions',
    { model: SERVED, messages: MESSAGES, n: 2, temperature: 1, seed: 11, max_tokens: 10 });
  assert.equal(r.status, 200, r.text);
  tally.generationOk++;
  multiChoiceIds.add(r.json.id);
  assert.equal(r.json.choices.length, 2);
  assert.deepEqual(r.json.choices.map((c) => c.index), [0, 1]);
  for (const c of r.json.choices) {
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
    assert.ok(c.finish_reason);
  }
  assert.notEqual(r.json.choices[0].message.content, r.json.choices[1].message.content, 'choices sample independently');
  const sum = r.json.usage.completion_tokens;
  if (r.json.choices.every((c) => c.finish_reason === 'length')) assert.equal(sum, 20, 'completion_tokens sums both choices');
  assert.ok(sum >= 2);
  assert.equal(r.json.usage.total_tokens, r.json.usage.prompt_tokens + sum);

  const c = await main.post('/v1/completions', { model: SERVED, prompt: 'Once upon a time', n: 2, temperature: 1, seed: 3, max_tokens: 6 });
  assert.equal(c.status, 200, c.text);
  tally.generationOk++;
  multiChoiceIds.add(c.json.id);
  assert.deepEqual(c.json.choices.map((x) => x.index), [0, 1]);
  assert.equal(c.json.usage.completion_tokens, 12, 'two choices of 6 tokens (length)');

  // Streaming n=2: a role chunk and a finish chunk per index; per-index deltas equal the
  // non-streaming choices for the same seed.
  const st = await main.stream('/v1/chat/completions', {
    model: SERVED, messages: MESSAGES, n: 2, temperature: 1, seed: 11, max_tokens: 10, stream: true,
    stream_options: { include_usage: true },
  });
  tally.generationOk++;
  multiChoiceIds.add(st.events[0]?.json?.id);
  assert.equal(st.status, 200, st.text);
  assert.deepEqual(st.errors, []);
  assert.equal(st.events.at(-1).data, '[DONE]');
  const texts = ['', ''];
  const roles = [0, 0];
  const finishes = [null, null];
  let usage = null;
  for (const ev of st.events.slice(0, -1)) {
    const ch = ev.json.choices[0];
    if (!ch) { usage = ev.json.usage; continue; }
    assert.ok(ch.index === 0 || ch.index === 1, JSON.stringify(ev.json));
    assert.equal(finishes[ch.index], null, `no chunk for index ${ch.index} after its finish chunk`);
    if (ch.delta?.role) roles[ch.index]++;
    texts[ch.index] += ch.delta?.content ?? '';
    if (ch.finish_reason) finishes[ch.index] = ch.finish_reason;
  }
  assert.deepEqual(roles, [1, 1], 'one role chunk per choice');
  assert.ok(finishes[0] && finishes[1], 'a finish chunk per choice');
  assert.deepEqual(texts, r.json.choices.map((x) => x.message.content));
  assert.deepEqual(usage, r.json.usage);
});

test('logit_bias +100 forces a token', async () => {
  const { tokens } = await tokenizePrompt(main, 'Hello');
  assert.equal(tokens.length, 1);
  const r = await main.post('/v1/chat/completions',
    { model: SERVED, messages: MESSAGES, max_tokens: 3, temperature: 1, seed: 3, logit_bias: { [tokens[0]]: 100 } });
  assert.equal(r.status, 200, r.text);
  tally.generationOk++;
  assert.equal(r.json.choices[0].message.content, 'HelloHelloHello');
});

test('ignore_eos, min_tokens and stop_token_ids follow vLLM', async () => {
  // Qwen3's <|im_end|> (tokenizer.json's added_tokens), the chat template's end of turn: +100 makes
  // it the greedy pick at every position it is allowed.
  const IM_END = 151645;
  const chat = (extra) => main.post('/v1/chat/completions',
    { model: SERVED, messages: MESSAGES, temperature: 0, max_tokens: 40, logit_bias: { [IM_END]: 100 }, ...extra });
  const check = (r, finish, tokens) => {
    assert.equal(r.status, 200, r.text);
    tally.generationOk++;
    assert.equal(r.json.choices[0].finish_reason, finish, r.text);
    assert.equal(r.json.usage.completion_tokens, tokens, r.text);
  };
  // The end-of-sequence token ends the output at once (it is counted, as OpenAI and vLLM count it).
  let r = await chat({});
  check(r, 'stop', 1);
  assert.equal(r.json.choices[0].message.content, '');
  // ignore_eos: exactly max_tokens, the same token 40 times (the output guard, which cuts 16
  // repeats of one token, is off for the request).
  check(await chat({ ignore_eos: true }), 'length', 40);
  // min_tokens: the first 5 tokens may not be a stop token, the 6th is.
  check(await chat({ min_tokens: 5 }), 'stop', 6);
  check(await chat({ min_tokens: 40 }), 'length', 40);
  // stop_token_ids: a forced "Hello" ends the output (not returned as text), with or without the
  // end-of-sequence tokens.
  const { tokens } = await tokenizePrompt(main, 'Hello');
  r = await chat({ logit_bias: { [tokens[0]]: 100 }, stop_token_ids: [tokens[0]], ignore_eos: true });
  check(r, 'stop', 1);
  assert.equal(r.json.choices[0].message.content, '');
  // A stop string is not checked before min_tokens either: "Hello" three times, then the stop.
  r = await chat({ logit_bias: { [tokens[0]]: 100 }, stop: ['Hello'], min_tokens: 3, max_tokens: 10 });
  check(r, 'stop', 3);
  assert.equal(r.json.choices[0].message.content, 'HelloHello');
  // Streaming: the same counts in the usage chunk.
  const res = await fetch(`${main.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: SERVED, messages: MESSAGES, temperature: 0, max_tokens: 40, logit_bias: { [IM_END]: 100 },
      min_tokens: 7, stream: true, stream_options: { include_usage: true } }),
  });
  assert.equal(res.status, 200);
  tally.generationOk++;
  const events = (await res.text()).split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)));
  assert.equal(events.find((e) => e.choices[0]?.finish_reason)?.choices[0].finish_reason, 'stop');
  assert.equal(events.at(-1).usage.completion_tokens, 8);
  // Bad values are 400s naming the field.
  const ok = { model: SERVED, messages: MESSAGES, max_tokens: 2 };
  const route = '/v1/chat/completions';
  await expect400(route, { ...ok, ignore_eos: 'yes' }, 'ignore_eos');
  await expect400(route, { ...ok, min_tokens: -1 }, 'min_tokens');
  await expect400(route, { ...ok, min_tokens: 3 }, 'min_tokens');  // more than max_tokens
  await expect400(route, { ...ok, stop_token_ids: 5 }, 'stop_token_ids');
  await expect400(route, { ...ok, stop_token_ids: [151936] }, 'stop_token_ids[0]');
  await expect400(route, { ...ok, stop_token_ids: [1, 'x'] }, 'stop_token_ids[1]');
  await expect400(route, { ...ok, stop_token_ids: Array(1025).fill(1) }, 'stop_token_ids');
  await expect400('/v1/completions', { model: SERVED, prompt: 'Hi', max_tokens: 2, min_tokens: 3 }, 'min_tokens');
  // Without max_tokens, min_tokens raises the default but not past the context left.
  await expect400('/v1/completions', { model: SERVED, prompt: 'Hi', min_tokens: 1_000_000 }, 'min_tokens');
});

test('seed determinism', async () => {
  const body = (seed) => ({ model: SERVED, messages: MESSAGES, temperature: 1, top_p: 0.95, seed, max_tokens: 16 });
  const a = await client.chat.completions.create(body(42));
  const b = await client.chat.completions.create(body(42));
  const c = await client.chat.completions.create(body(43));
  tally.generationOk += 3;
  assert.equal(a.choices[0].message.content, b.choices[0].message.content, 'same seed, same text');
  assert.notEqual(a.choices[0].message.content, c.choices[0].message.content, 'different seed, different text');
});

test('stop string across a token boundary ends the text right before it', async (t) => {
  const prompt = 'List some words:';
  const base = await main.post('/v1/completions', { model: SERVED, prompt, temperature: 0, max_tokens: 40 });
  assert.equal(base.status, 200, base.text);
  tally.generationOk++;
  const full = base.json.choices[0].text;
  // Split the output into token pieces with /tokenize + per-token /detokenize.
  const { tokens } = await tokenizePrompt(main, full);
  const pieces = [];
  for (const t of tokens) pieces.push(await detokenize(main, [t]));
  assert.equal(pieces.join(''), full, 'per-token pieces join to the text');
  let stop = null;
  let cut = -1;
  let offset = 0;
  for (let i = 0; i + 1 < pieces.length; i++) {
    offset += pieces[i].length;
    const a = codePoints(pieces[i]);
    const b = codePoints(pieces[i + 1]);
    if (offset < 4 || a.length < 2 || b.length < 2) continue;
    if ([...a, ...b].some((ch) => ch === '\uFFFD')) continue;
    const candidate = a.slice(-2).join('') + b.slice(0, 2).join('');
    const first = full.indexOf(candidate);
    if (first <= 0) continue;
    stop = candidate;
    cut = first;
    break;
  }
  assert.ok(stop, `no usable token boundary in ${JSON.stringify(pieces)}`);
  const expected = full.slice(0, cut);
  t.diagnostic(`stop ${JSON.stringify(stop)} spans pieces; expected text ${JSON.stringify(expected)}`);

  const r = await main.post('/v1/completions', { model: SERVED, prompt, temperature: 0, max_tokens: 40, stop: [stop] });
  assert.equal(r.status, 200, r.text);
  tally.generationOk++;
  assert.equal(r.json.choices[0].text, expected, `text ends right before stop ${JSON.stringify(stop)}`);
  assert.equal(r.json.choices[0].finish_reason, 'stop');

  const s = await main.stream('/v1/completions', { model: SERVED, prompt, temperature: 0, max_tokens: 40, stop, stream: true });
  tally.generationOk++;
  assert.deepEqual(s.errors, []);
  const chunks = s.events.slice(0, -1).map((e) => e.json);
  const deltas = chunks.map((c) => c.choices[0]?.text ?? '');
  for (const d of deltas) assert.ok(!d.includes(stop), `delta ${JSON.stringify(d)} contains the stop`);
  assert.equal(deltas.join(''), expected);
  assert.equal(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason, 'stop');

  // Chat with a stop string: same rule.
  const chatFull = chatText;
  const chatStop = codePoints(chatFull).slice(3, 6).join('');
  if (chatStop.length && !chatStop.includes('\uFFFD')) {
    const cs = await streamChat({ messages: MESSAGES, temperature: 0, max_tokens: 24, stop: [chatStop] });
    tally.generationOk++;
    assert.equal(cs.text, chatFull.slice(0, chatFull.indexOf(chatStop)));
    for (const d of cs.deltas) assert.ok(!d.includes(chatStop));
    assert.equal(cs.finish, 'stop');
  }
});

test('max_tokens: finish_reason length and completion_tokens == max_tokens', async () => {
  for (const max of [1, 7]) {
    const r = await client.chat.completions.create({ model: SERVED, messages: MESSAGES, temperature: 0.7, seed: 1, max_tokens: max });
    tally.generationOk++;
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, max);
  }
  const s = await streamChat({ messages: MESSAGES, temperature: 0, max_tokens: 5, stream_options: { include_usage: true } },
    { expectUsage: true });
  tally.generationOk++;
  assert.equal(s.finish, 'length');
  assert.equal(s.usage.completion_tokens, 5);
});

test('logprobs with top_logprobs 2', async () => {
  const r = await client.chat.completions.create({
    model: SERVED, messages: MESSAGES, temperature: 0, max_tokens: 8, logprobs: true, top_logprobs: 2,
  });
  tally.generationOk++;
  const content = r.choices[0].logprobs?.content;
  assert.ok(Array.isArray(content), JSON.stringify(r.choices[0]));
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) {
    assert.equal(typeof e.token, 'string');
    assert.equal(typeof e.logprob, 'number');
    assert.ok(e.logprob <= 0, `logprob ${e.logprob} <= 0`);
    assert.ok(Array.isArray(e.top_logprobs) && e.top_logprobs.length === 2, JSON.stringify(e));
    for (const t of e.top_logprobs) {
      assert.equal(typeof t.token, 'string');
      assert.ok(t.logprob <= 0);
    }
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob, 'sorted descending');
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-4, JSON.stringify(e));
  }
  // The tokens' bytes concatenate to the reply's UTF-8 bytes.
  assert.ok(content.every((e) => Array.isArray(e.bytes)), 'every entry has bytes');
  assert.equal(Buffer.from(content.flatMap((e) => e.bytes)).toString('utf8'), r.choices[0].message.content);

  // Streaming logprobs: one entry per token overall.
  const s = await main.stream('/v1/chat/completions', {
    model: SERVED, messages: MESSAGES, temperature: 0, max_tokens: 8, logprobs: true, top_logprobs: 2, stream: true,
  });
  tally.generationOk++;
  assert.deepEqual(s.errors, []);
  const entries = s.events.slice(0, -1).flatMap((e) => e.json.choices[0]?.logprobs?.content ?? []);
  assert.equal(entries.length, content.length);
  entries.forEach((e, i) => {
    assert.equal(e.token, content[i].token);
    assert.ok(Math.abs(e.logprob - content[i].logprob) < 1e-5);
  });
});

test('400s name the offending param', async () => {
  const chat = '/v1/chat/completions';
  const ok = { model: SERVED, messages: MESSAGES, max_tokens: 2 };
  await expect400(chat, { ...ok, temperature: 3 }, 'temperature');
  await expect400(chat, { ...ok, top_p: 0 }, 'top_p');
  await expect400(chat, { ...ok, n: 0 }, 'n');
  await expect400(chat, { ...ok, logit_bias: { 999999999: 5 } }, 'logit_bias');
  await expect400(chat, { ...ok, logit_bias: { 151936: 5 } }, 'logit_bias');
  await expect400(chat, { model: SERVED, max_tokens: 2 }, 'messages');
  await expect400(chat, { ...ok, messages: 'hello' }, 'messages');
  await expect400(chat, { ...ok, temperature: 'hot' }, 'temperature');
  await expect400(chat, { ...ok, max_tokens: '5' }, 'max_tokens');
  await expect400(chat, { ...ok, stream: 'yes' }, 'stream');
  await expect400(chat, { ...ok, stop: 5 }, 'stop');
  await expect400(chat, { ...ok, top_logprobs: 21 }, 'top_logprobs');
  await expect400(chat, { ...ok, top_logprobs: 2 }, 'top_logprobs');  // without logprobs: true
  await expect400(chat, { ...ok, user: 5 }, 'user');
  await expect400('/v1/completions', { model: SERVED, max_tokens: 2 }, 'prompt');
  await expect400('/v1/completions', { model: SERVED, prompt: [1, -1], max_tokens: 2 }, 'prompt');
  await expect400('/v1/completions', { model: SERVED, prompt: 'hi', max_tokens: 0 }, 'max_tokens');
  // Malformed JSON: 400 invalid_request_error (no param to name).
  const bad = await main.request('POST', chat, { rawBody: '{"model": "x", "messages": [', headers: { 'Content-Type': 'application/json' } });
  tally.status400 += bad.status === 400 ? 1 : 0;
  const e = assertError(bad, 400);
  assert.equal(e.type, 'invalid_request_error');
  // Not an object.
  const arr = await main.request('POST', chat, { rawBody: '[1,2]', headers: { 'Content-Type': 'application/json' } });
  tally.status400 += arr.status === 400 ? 1 : 0;
  assertError(arr, 400);

  // Through the official client: BadRequestError with status 400 and param.
  await assert.rejects(
    client.chat.completions.create({ model: SERVED, messages: MESSAGES, temperature: 3 }),
    (err) => err instanceof OpenAI.BadRequestError && err.status === 400 && err.param === 'temperature',
  );
  tally.status400++;
});

test('client disconnect mid-stream frees the slot; the next request works', async (t) => {
  let aborted = false;
  let deltaSeen = false;
  const r = await main.stream('/v1/chat/completions',
    { model: SERVED, messages: MESSAGES, temperature: 1, seed: 9, max_tokens: 2000, stream: true },
    {
      onEvent: (ev, ctl) => {
        const c = ev.json?.choices?.[0]?.delta?.content;
        if (typeof c === 'string' && c.length && !deltaSeen) {
          deltaSeen = true;
          ctl.abort();
          aborted = true;
        }
      },
    });
  assert.ok(deltaSeen && aborted && r.aborted, 'aborted after the first content delta');
  const deadline = Date.now() + 2000;
  let running;
  for (;;) {
    const m = await main.metrics();
    running = m.values.get('qwenserve_num_requests_running');
    if (running === 0 || Date.now() > deadline) break;
    await sleep(50);
  }
  assert.equal(running, 0, 'qwenserve_num_requests_running is 0 within 2 s of the disconnect');
  const after = await client.chat.completions.create({ model: SERVED, messages: MESSAGES, temperature: 0, max_tokens: 24 });
  tally.generationOk++;
  assert.equal(after.choices[0].message.content, chatText, 'the next request still works (same output)');
  // The cancelled request was logged and did not run to max_tokens.
  let cancelled = [];
  for (let i = 0; i < 100 && cancelled.length === 0; i++) {
    cancelled = main.logRecords().filter((rec) => rec.max_tokens === 2000);
    if (cancelled.length === 0) await sleep(20);
  }
  assert.equal(cancelled.length, 1, 'one log line for the disconnected request');
  t.diagnostic(`disconnected request log line: ${JSON.stringify(cancelled[0])}`);
  assert.ok(cancelled[0].completion_tokens < 2000, `generation stopped early: ${JSON.stringify(cancelled[0])}`);
});

test('running gauge is 1 while a stream is in progress', async (t) => {
  let running = null;
  const r = await main.stream('/v1/chat/completions',
    { model: SERVED, messages: MESSAGES, temperature: 1, seed: 19, max_tokens: 1500, stream: true },
    {
      onEvent: (ev, ctl) => {
        const c = ev.json?.choices?.[0]?.delta?.content;
        if (running === null && typeof c === 'string' && c.length) {
          running = 'pending';
          main.metrics().then((m) => {
            running = m.values.get('qwenserve_num_requests_running');
            ctl.abort();
          }, () => ctl.abort());
        }
      },
    });
  // The metrics read may finish after the stream: wait for it.
  for (let i = 0; i < 100 && running === 'pending'; i++) await sleep(20);
  t.diagnostic(`gauge read mid-stream: ${running} (stream aborted: ${r.aborted})`);
  if (!r.aborted) {
    // The whole generation finished before /metrics answered: nothing to conclude about the gauge.
    tally.generationOk++;
    assert.ok(running === 0 || running === 1, `running gauge ${running}`);
  } else {
    assert.equal(running, 1, 'one request running during the stream');
  }
  const deadline = Date.now() + 2000;
  let now;
  for (;;) {
    now = (await main.metrics()).values.get('qwenserve_num_requests_running');
    if (now === 0 || Date.now() > deadline) break;
    await sleep(50);
  }
  assert.equal(now, 0);
});

test('/metrics counts successful generations and 400s exactly', async () => {
  const before = (await main.metrics()).values;
  const e2eKey = 'qwenserve_e2e_request_latency_seconds_count';
  const ttftKey = 'qwenserve_time_to_first_token_seconds_count';
  const s400 = 'qwenserve_http_requests_total{status="400"}';
  assert.ok(before.has(e2eKey), 'e2e histogram present');
  assert.ok(before.has(ttftKey), 'TTFT histogram present');
  // The totals so far match this file's tally (every earlier generation on main was counted).
  assert.equal(before.get(e2eKey), tally.generationOk, 'e2e count == successful generations so far');
  assert.equal(before.get(s400) ?? 0, tally.status400, '400 count so far');

  const N = 5;
  const okBefore = tally.generationOk;
  const badBefore = tally.status400;
  await client.chat.completions.create({ model: SERVED, messages: MESSAGES, max_tokens: 3, temperature: 0 });
  await streamChat({ messages: MESSAGES, max_tokens: 3, temperature: 0 });
  await main.post('/v1/completions', { model: SERVED, prompt: 'abc', max_tokens: 3 });
  await client.completions.create({ model: SERVED, prompt: [1, 2, 3], max_tokens: 2 });
  await main.stream('/v1/completions', { model: SERVED, prompt: 'xyz', max_tokens: 4, stream: true, stream_options: { include_usage: true } });
  tally.generationOk += N;
  await expect400('/v1/chat/completions', { model: SERVED, messages: MESSAGES, top_p: 7 }, 'top_p');
  await expect400('/v1/completions', { model: SERVED, prompt: 'x', n: 17 }, 'n');
  assert.equal(tally.status400 - badBefore, 2);

  let after;
  const deadline = Date.now() + 2000;
  for (;;) {
    after = (await main.metrics()).values;
    if (after.get(e2eKey) - before.get(e2eKey) >= N || Date.now() > deadline) break;
    await sleep(25);
  }
  await sleep(100); // nothing more may arrive
  after = (await main.metrics()).values;
  assert.equal(after.get(e2eKey) - before.get(e2eKey), N, 'e2e _count delta');
  assert.equal(after.get(ttftKey) - before.get(ttftKey), N, 'TTFT _count delta');
  assert.equal(after.get(s400) - (before.get(s400) ?? 0), 2, 'http_requests_total{status="400"} delta');
  assert.ok(after.get('qwenserve_http_requests_total{status="200"}') - (before.get('qwenserve_http_requests_total{status="200"}') ?? 0) >= N);
  assert.equal(after.get(e2eKey), okBefore + N);
  // Histogram consistency: +Inf bucket == _count.
  assert.equal(after.get('qwenserve_e2e_request_latency_seconds_bucket{le="+Inf"}'), after.get(e2eKey));
  assert.equal(after.get('qwenserve_num_requests_running'), 0);
  assert.equal(after.get('qwenserve_num_requests_waiting'), 0);
});

test('/metrics passes promtool check metrics', async (t) => {
  const promtool = (process.env.PATH || '/usr/bin').split(':').map((d) => path.join(d, 'promtool'))
    .find((p) => fs.existsSync(p));
  if (!promtool) {
    t.skip('promtool not installed (Debian package "prometheus"): skipping the exposition-format check');
    return;
  }
  const { text } = await main.metrics();
  const res = await new Promise((resolve) => {
    const child = execFile(promtool, ['check', 'metrics'], (err, stdout, stderr) => resolve({ err, stdout, stderr }));
    child.stdin.end(text);
  });
  assert.equal(res.err, null, `promtool check metrics failed:\n${res.stdout}\n${res.stderr}`);
});

test('/stats percentiles equal those of the JSON log lines', async () => {
  const expectedOk = tally.generationOk;
  let stats;
  let ok;
  const deadline = Date.now() + 3000;
  for (;;) {
    const res = await main.get('/stats');
    assert.equal(res.status, 200, res.text);
    stats = res.json;
    const records = main.logRecords();
    ok = records.filter((r) => r.status >= 200 && r.status < 300 && !('error' in r && r.error !== null));
    if ((ok.length === expectedOk && stats.window_requests.requests === ok.length) || Date.now() > deadline) break;
    await sleep(50);
  }
  assert.equal(ok.length, expectedOk, 'one successful log line per successful generation');
  const w = stats.window_requests;
  assert.equal(w.requests, ok.length, '/stats window counts the successful requests');
  const recent = ok.slice(-1000);
  for (const rec of recent) {
    for (const f of ['id', 'status', 'finish_reason', 'prompt_tokens', 'completion_tokens', 'queue_ms', 'ttft_ms',
      'itl_ms_mean', 'itl_ms_p95', 'e2e_ms', 'temperature', 'top_p', 'max_tokens']) {
      assert.ok(f in rec, `log line has ${f}: ${JSON.stringify(rec)}`);
    }
    assert.ok(rec.e2e_ms >= (rec.ttft_ms ?? 0), `e2e_ms >= ttft_ms: ${JSON.stringify(rec)}`);
    if (!multiChoiceIds.has(rec.id) && rec.ttft_ms !== null) {
      assert.ok(rec.ttft_ms >= rec.queue_ms, `ttft_ms includes queue_ms: ${JSON.stringify(rec)}`);
    }
  }
  const close = (got, want, what) => {
    const tol = 0.002 + 1e-6 * Math.abs(want); // log lines round to microseconds at best
    assert.ok(got !== null && Math.abs(got - want) <= Math.max(tol, 0.01),
      `${what}: /stats ${got} vs log ${want}`);
  };
  for (const [name, field] of [['ttft_ms', 'ttft_ms'], ['e2e_ms', 'e2e_ms']]) {
    const samples = recent.map((r) => r[field]).filter((v) => typeof v === 'number');
    assert.equal(w[name].count, samples.length, `${name} count`);
    for (const p of [50, 90, 95, 99]) close(w[name][`p${p}`], percentile(samples, p), `${name} p${p}`);
    close(w[name].max, Math.max(...samples), `${name} max`);
    close(w[name].mean, samples.reduce((a, b) => a + b, 0) / samples.length, `${name} mean`);
  }
  assert.equal(w.generation_tokens, recent.reduce((a, r) => a + r.completion_tokens, 0));
  assert.equal(typeof stats.running, 'number');
  assert.equal(typeof stats.waiting, 'number');
  assert.equal(typeof stats.kv_cache_usage, 'number');
});

test('SIGTERM: main server exits 0', async () => {
  const exit = await main.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, `stderr tail:\n${main.stderr.slice(-2000)}`);
});

// ---- auth server ----------------------------------------------------------------------------------

test('401 with --api-key on every /v1 route; /health stays open', async () => {
  const routes = [
    ['POST', '/v1/chat/completions', { model: 'qwenserve', messages: MESSAGES, max_tokens: 2 }],
    ['POST', '/v1/completions', { model: 'qwenserve', prompt: 'hi', max_tokens: 2 }],
    ['GET', '/v1/models', undefined],
  ];
  for (const [method, route, body] of routes) {
    for (const headers of [{}, { Authorization: 'Bearer wrong-key' }, { Authorization: API_KEY }]) {
      const res = await auth.request(method, route, { body, headers });
      const e = assertError(res, 401);
      assert.ok(e.type, `${method} ${route} ${JSON.stringify(headers)}`);
      // RFC 9110 section 11.6.1: a 401 carries WWW-Authenticate with the scheme it wants.
      assert.equal(res.headers.get('www-authenticate'), 'Bearer');
    }
    const good = await auth.request(method, route, { body, headers: { Authorization: `Bearer ${API_KEY}` } });
    assert.equal(good.status, 200, `${method} ${route} with the key: ${good.text}`);
  }
  assert.equal((await auth.get('/health')).status, 200, '/health needs no key');
  const wrong = new OpenAI({ baseURL: auth.baseURL, apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (err) => err instanceof OpenAI.AuthenticationError && err.status === 401);
  const right = new OpenAI({ baseURL: auth.baseURL, apiKey: API_KEY, maxRetries: 0 });
  const r = await right.chat.completions.create({ model: 'qwenserve', messages: MESSAGES, max_tokens: 3 });
  assert.equal(r.choices.length, 1);
  const exit = await auth.stop();
  assert.deepEqual(exit, { code: 0, signal: null });
});

// ---- limits server (--ctx-size 256 --max-body-bytes 4096 --max-num-seqs 1 --keepalive 0.1) ------

test('413 for an oversized body, 415 for text/plain', async () => {
  const big = { model: 'qwenserve', messages: [{ role: 'user', content: 'a'.repeat(10_000) }], max_tokens: 2 };
  const res = await limits.post('/v1/chat/completions', big);
  assertError(res, 413);
  const plain = await limits.request('POST', '/v1/chat/completions', {
    rawBody: JSON.stringify({ model: 'qwenserve', messages: MESSAGES, max_tokens: 2 }),
    headers: { 'Content-Type': 'text/plain' },
  });
  assertError(plain, 415);
  // The message quotes the client's header JSON-escaped and cut to its first 64 bytes.
  const longType = `text/plain; x="${'a'.repeat(2000)}"`;
  const long = await limits.request('POST', '/v1/chat/completions', {
    rawBody: '{}', headers: { 'Content-Type': longType },
  });
  assertError(long, 415);
  assert.equal(long.json.error.message, 'Content-Type must be application/json, got ' +
    `${JSON.stringify(longType.slice(0, 64))}... (${longType.length} bytes)`);
  // A small JSON body still works.
  const ok = await limits.post('/v1/chat/completions', { model: 'qwenserve', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
  assert.equal(ok.status, 200, ok.text);
});

test('prompt longer than --ctx-size 256: 400 naming both numbers', async () => {
  const messages = [{ role: 'user', content: 'word '.repeat(400) }];
  const tok = await tokenizeMessages(limits, messages);
  assert.equal(tok.max_model_len, 256);
  assert.ok(tok.count > 256, `prompt has ${tok.count} tokens`);
  const res = await limits.post('/v1/chat/completions', { model: 'qwenserve', messages, max_tokens: 2 });
  const e = assertError(res, 400, 'messages');
  assert.ok(e.message.includes(String(tok.count)), `message names the prompt token count ${tok.count}: ${e.message}`);
  assert.ok(e.message.includes('256'), `message names the context length: ${e.message}`);

  const prompt = 'word '.repeat(400);
  const ptok = await tokenizePrompt(limits, prompt);
  const c = await limits.post('/v1/completions', { model: 'qwenserve', prompt, max_tokens: 2 });
  const ce = assertError(c, 400);
  assert.ok(ce.message.includes(String(ptok.count)) && ce.message.includes('256'), ce.message);
});

test('a request waiting for a slot gets SSE keep-alive comments (--max-num-seqs 1)', async (t) => {
  const chat = (max, seed) => ({ model: 'qwenserve', messages: [{ role: 'user', content: 'hi' }], temperature: 1, seed, max_tokens: max, stream: true });
  let startB;
  const bStarted = new Promise((resolve) => { startB = resolve; });
  let waitingSeen = null;
  const a = limits.stream('/v1/chat/completions', chat(200, 1), {
    onEvent: (ev) => { if (ev.json?.choices?.[0]?.delta?.content) startB(); },
  });
  await bStarted;
  const b = limits.stream('/v1/chat/completions', chat(4, 2));
  await sleep(100);
  waitingSeen = (await limits.metrics()).values.get('qwenserve_num_requests_waiting');
  const [ra, rb] = await Promise.all([a, b]);
  for (const r of [ra, rb]) {
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.errors, []);
    assert.equal(r.events.at(-1).data, '[DONE]');
  }
  const idB = rb.events[0].json.id;
  const recB = await limits.logRecordFor(idB);
  t.diagnostic(`waiting gauge ${waitingSeen}; B queue_ms ${recB?.queue_ms}; B comments ${JSON.stringify(rb.comments)}`);
  assert.ok(recB, 'log line for the queued request');
  assert.equal(waitingSeen, 1, 'qwenserve_num_requests_waiting is 1 while B waits');
  assert.ok(recB.queue_ms >= 100, `B waited for the slot: ${JSON.stringify(recB)}`);
  if (recB.queue_ms >= 450) {
    assert.ok(rb.comments.some((c) => c.trim() === 'keep-alive'), 'keep-alive comments while waiting');
  } else {
    t.diagnostic('B waited less than 450 ms: keep-alive not required');
  }
});

test('SIGTERM lets an in-flight stream finish, answers newcomers 503 meanwhile, then exits 0', async () => {
  let signalled = false;
  let newcomer;
  const r = await limits.stream('/v1/chat/completions',
    { model: 'qwenserve', messages: [{ role: 'user', content: 'hi' }], temperature: 0, max_tokens: 200, stream: true,
      stream_options: { include_usage: true } },
    {
      onEvent: (ev) => {
        if (!signalled && ev.json?.choices?.[0]?.delta?.content) {
          signalled = true;
          limits.proc.kill('SIGTERM');
          // While the stream drains, the listener stays open and a new request is refused with
          // 503 + Retry-After (not a refused connection).
          newcomer = new Promise((r) => setTimeout(r, 20)).then(() => limits.post('/v1/chat/completions',
            { model: 'qwenserve', messages: [{ role: 'user', content: 'late' }], max_tokens: 2 }));
        }
      },
    });
  assert.ok(signalled);
  assert.deepEqual(r.errors, []);
  assert.equal(r.events.at(-1)?.data, '[DONE]', 'the stream completed after SIGTERM');
  const usage = r.events.at(-2)?.json?.usage;
  assert.equal(usage?.completion_tokens, 200, 'all 200 tokens were generated');
  const late = await newcomer;
  assert.equal(late.status, 503, late.text);
  assert.equal(late.json.error.code, 'server_shutdown', late.text);  // the code /ready has while draining
  assert.ok(late.headers.get('retry-after'), 'Retry-After on the 503');
  const exit = await limits.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, limits.stderr.slice(-2000));
});
