// End-to-end tests of what `qwenserve serve` refuses, on the tiny random-weight test model:
// configurations that cannot work exit 1 at startup with a clear message (and no drain), requests
// naming an unknown model get OpenAI's 404 (model_not_found), a malformed Content-Length gets a prompt 400, and every
// rejected request gets one JSON log line.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/rejections.test.mjs
// Env: see server_harness.mjs (QS_BIN, QS_WORK_DIR, QS_TOKENIZER_DIR).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import OpenAI from 'openai';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
import { QS_BIN, startServer, makeTinyModel, freePort, cleanWorkDir } from './server_harness.mjs';

const SERVED = 'tiny-rej';
const ALIAS = 'tiny-alias';
const MESSAGES = [{ role: 'user', content: 'Hello there' }];

let server;

before(async () => {
  await makeTinyModel();
  server = await startServer(['--served-model-name', SERVED, ALIAS, '--log-format', 'json']);
});

after(async () => {
  if (server && !server.exit) await server.stop();
  cleanWorkDir();
});

/**
 * Runs `qwenserve serve --model tiny --threads 2 ...args` (through `bash -c SHELL_PREFIX; exec`
 * when shellPrefix is given); resolves {code, signal, stderr, ms}. SIGKILLs it after timeoutMs.
 */
async function serveUntilExit(args, { timeoutMs = 30000, shellPrefix } = {}) {
  const model = await makeTinyModel();
  const t0 = performance.now();
  const argv = ['serve', '--model', model, '--threads', '2', ...args];
  const proc = shellPrefix
    ? spawn('bash', ['-c', `${shellPrefix} && exec "$0" "$@"`, QS_BIN, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(QS_BIN, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (d) => { stderr += d; });
  proc.stdout.resume();
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const [code, signal] = await once(proc, 'exit');
  clearTimeout(timer);
  return { code, signal, stderr, ms: performance.now() - t0 };
}

// The fatal error of a serve that never served, as its "error: MESSAGE" text line: with
// --log-format json (the default) every stderr line is a JSON object and the error is the one with
// level "error"; with text it is the plain line.
function assertStartupError(res, pattern, { logFormat = 'json' } = {}) {
  assert.equal(res.signal, null, `killed by ${res.signal} (hung?); stderr:\n${res.stderr}`);
  assert.equal(res.code, 1, `exit code; stderr:\n${res.stderr}`);
  let text = res.stderr;
  if (logFormat === 'json') {
    const lines = res.stderr.split('\n').filter((l) => l !== '');
    const objects = lines.map((l) => { try { return JSON.parse(l); } catch { return null; } });
    assert.deepEqual(lines.filter((_, i) => objects[i] === null), [], 'every stderr line is JSON under --log-format json');
    const errors = objects.filter((o) => o.level === 'error');
    assert.equal(errors.length, 1, `one error line: ${res.stderr}`);
    assert.equal(objects.at(-1), errors[0], 'the error is the last line');
    assert.match(errors[0].ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    text = objects.map((o) => (o.level === 'error' ? `error: ${o.message}` : `qwenserve: ${o.message}`)).join('\n');
  }
  assert.match(text, pattern);
  assert.doesNotMatch(text, /draining|serving/, 'nothing was served, so nothing is drained');
  assert.doesNotMatch(text, /: Success$/m, 'errno is never reported when it does not apply');
}

test('--host 999.1.1.1: "cannot listen ... invalid address", exit 1, no drain', async () => {
  const port = await freePort();
  const res = await serveUntilExit(['--host', '999.1.1.1', '--port', String(port)]);
  assertStartupError(res, new RegExp(`^error: cannot listen on 999\\.1\\.1\\.1:${port}: invalid address$`, 'm'));
});

test('--log-format text: the fatal error stays one "error: ..." text line', async () => {
  const port = await freePort();
  const res = await serveUntilExit(['--host', '999.1.1.1', '--port', String(port), '--log-format', 'text']);
  assertStartupError(res, new RegExp(`^error: cannot listen on 999\\.1\\.1\\.1:${port}: invalid address$`, 'm'),
                     { logFormat: 'text' });
});

test('an option missing its value does not take the next option as one (CLI11 would)', async () => {
  for (const [option, next] of [['--served-model-name', '--port'], ['--host', '--no-output-guard'], ['--api-key', '--port=8']]) {
    const res = await serveUntilExit(['--port', String(await freePort()), option, next]);
    assertStartupError(res, new RegExp(`^error: ${option} is missing its value: it took the option '${next}' as one$`, 'm'),
                       { logFormat: 'text' });
  }
});

test('--api-key with an empty key is refused, not an open API', async () => {
  const res = await serveUntilExit(['--port', String(await freePort()), '--api-key', '']);
  assertStartupError(res, /^error: --api-key: the key is empty, which would leave the API open/m);
});

test('a port in use: "address already in use", exit 1', async () => {
  const blocker = net.createServer();
  blocker.listen(0, '127.0.0.1');
  await once(blocker, 'listening');
  const { port } = blocker.address();
  try {
    const res = await serveUntilExit(['--host', '127.0.0.1', '--port', String(port)]);
    assertStartupError(res, new RegExp(`^error: cannot listen on 127\\.0\\.0\\.1:${port}: address already in use$`, 'm'));
  } finally {
    blocker.close();
  }
});

test('--max-queue 100000: rejected at startup naming the option and the thread limit', async () => {
  const res = await serveUntilExit(['--port', String(await freePort()), '--max-queue', '100000']);
  assertStartupError(res, /^error: .*--max-queue 100000.*HTTP worker threads.*limit of \d+/m);
});

test('--kv-cache-memory 999TiB: rejected naming the option and both sizes, exit 1', async () => {
  const res = await serveUntilExit(['--port', String(await freePort()), '--kv-cache-memory', '999TiB']);
  // 999 TiB in bytes and the machine's physical memory as the OS reports it (MemTotal).
  const budget = (999n * 2n ** 40n).toString();
  assertStartupError(res, /^error: --kv-cache-memory 999\.0 TiB .*physical memory/m);
  assert.ok(res.stderr.includes(budget), `names the budget in bytes (${budget}): ${res.stderr}`);
  assert.ok(res.stderr.includes(String(os.totalmem())), `names physical memory ${os.totalmem()} bytes: ${res.stderr}`);
});

test('--ctx-size above the model\'s max_position_embeddings: one warning naming both, then the cap', async () => {
  const model = await makeTinyModel();
  const info = spawnSync(QS_BIN, ['info', '--model', model, '--json'], { encoding: 'utf8' });
  assert.equal(info.status, 0, info.stderr);
  const trained = JSON.parse(info.stdout).config.max_position_embeddings;
  const run = spawnSync(QS_BIN, ['generate', '--model', model, '--prompt', 'hi', '-n', '1', '--threads', '1',
    '--ctx-size', '100000000'], { encoding: 'utf8', timeout: 60000 });
  assert.equal(run.status, 0, run.stderr);
  const warnings = run.stderr.split('\n').filter((line) => line.includes('warning: --ctx-size'));
  assert.equal(warnings.length, 1, run.stderr);
  assert.ok(warnings[0].includes('100000000') && warnings[0].includes(`max_position_embeddings ${trained}`) &&
            warnings[0].endsWith(`using ${trained}`), warnings[0]);
  const within = spawnSync(QS_BIN, ['generate', '--model', model, '--prompt', 'hi', '-n', '1', '--threads', '1',
    '--ctx-size', String(trained)], { encoding: 'utf8', timeout: 60000 });
  assert.equal(within.status, 0, within.stderr);
  assert.doesNotMatch(within.stderr, /warning: --ctx-size/);
});

test('HTTP worker threads that cannot be created: exit 1 with a message, not an abort or a hang', async (t) => {
  if (fs.readFileSync(QS_BIN).includes('__asan_init')) {  // linked against libasan
    t.skip('an ASan build reserves terabytes of address space: ulimit -v cannot apply');
    return;
  }
  // 16 + 900 + 32 threads with 8 MiB stacks need ~7.4 GiB of address space; allow 2.4 GiB.
  const res = await serveUntilExit(['--port', String(await freePort()), '--max-queue', '900', '--kv-cache-memory', '64MiB'],
    { shellPrefix: 'ulimit -s 8192 && ulimit -v 2500000' });
  assertStartupError(res, /^error: cannot start 948 HTTP worker threads \(\d+ started\): /m);
});

test('a generation cut by the shutdown grace is a retryable 503 / error event on every route, never a normal finish', async () => {
  const cut = await startServer(['--shutdown-grace', '0.5', '--ctx-size', '4096', '--max-num-seqs', '4', '--log-format', 'json',
    '--no-output-guard']);
  const long = { max_tokens: 4000, ignore_eos: true, temperature: 0 };
  const user = [{ role: 'user', content: 'Keep talking.' }];
  const requests = [
    cut.post('/v1/chat/completions', { ...long, messages: user }),
    cut.stream('/v1/chat/completions', { ...long, messages: user, stream: true }),
    cut.post('/v1/messages', { ...long, messages: user }),
    cut.stream('/v1/responses', { ...long, max_output_tokens: 4000, max_tokens: undefined, input: 'Keep talking.', stream: true }),
  ];
  await sleep(300);  // all four are generating
  cut.proc.kill('SIGTERM');
  const [chat, chatStream, messages, responses] = await Promise.all(requests);
  const exit = await cut.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, cut.stderr.slice(-2000));
  // Non-streaming: a 503 in the route's error shape (clients retry a 503), not a 200 with a cut reply.
  assert.equal(chat.status, 503, chat.text);
  assert.equal(chat.json.error.code, 'server_shutdown', chat.text);
  assert.equal(messages.status, 503, messages.text);
  assert.equal(messages.json.type, 'error', messages.text);
  assert.equal(messages.json.error.type, 'overloaded_error', messages.text);
  // Streaming: the tokens already sent stay sent; the stream then ends with an error, not a finish.
  assert.ok(chatStream.events.some((e) => e.json?.choices?.[0]?.delta?.content), 'tokens were streamed first');
  assert.ok(!chatStream.events.some((e) => e.json?.choices?.[0]?.finish_reason), 'no finish_reason');
  assert.equal(chatStream.events.find((e) => e.json?.error)?.json.error.code, 'server_shutdown');
  const types = responses.events.map((e) => e.json?.type).filter(Boolean);
  assert.ok(!types.includes('response.completed'), types.join(' '));
  assert.equal(types.at(-1), 'response.failed', types.join(' '));
  assert.equal(responses.events.at(-1).json.response.error.code, 'server_shutdown');
  // The log lines say the same: an error (status 503 where no 200 was sent), not a finish.
  const records = cut.logRecords().filter((r) => /shut down before this generation finished/.test(r.error ?? ''));
  assert.equal(records.length, 4, cut.stderr.slice(-3000));
  for (const r of records) {
    assert.equal(r.finish_reason, 'error', JSON.stringify(r));
    assert.ok(r.completion_tokens > 0, JSON.stringify(r));
  }
  assert.deepEqual(records.map((r) => r.status).sort(), [200, 200, 503, 503], 'the two streams had sent their 200');
});

test('a second SIGTERM during the drain exits at once with 128 + 15', async () => {
  const srv = await startServer(['--shutdown-grace', '60', '--ctx-size', '4096', '--max-num-seqs', '2']);
  const long = srv.post('/v1/chat/completions',
    { messages: [{ role: 'user', content: 'Keep talking.' }], max_tokens: 4000, ignore_eos: true, temperature: 0 })
    .catch((e) => e);  // its connection is cut by the exit
  await sleep(300);  // generating
  srv.proc.kill('SIGTERM');
  const drainBy = Date.now() + 5000;
  while (!/draining \(grace 60 s\)/.test(srv.stderr) && Date.now() < drainBy) await sleep(20);
  assert.match(srv.stderr, /draining \(grace 60 s\)/);
  assert.equal(srv.exit, null, 'the first signal drains; the process is still there');
  const second = Date.now();
  srv.proc.kill('SIGTERM');
  const exit = await srv.exited;
  assert.deepEqual(exit, { code: 143, signal: null }, srv.stderr.slice(-2000));
  assert.ok(Date.now() - second < 5000, `exited ${Date.now() - second} ms after the second signal`);
  assert.match(srv.stderr, /received signal 15 again: exiting now without finishing the drain/);
  await long;
});

test('connections that send part of a head and stop do not hold /health up (the worker pool grows)', async () => {
  // --max-num-seqs 2 + --max-queue 4 + 32 spare = 38 threads, fewer than the idle connections.
  const small = await startServer(['--max-num-seqs', '2', '--max-queue', '4', '--request-head-timeout', '20']);
  const sockets = [];
  try {
    for (let i = 0; i < 60; i++) {
      const socket = net.connect(small.port, '127.0.0.1');
      socket.on('error', () => {});
      await once(socket, 'connect');
      socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
      sockets.push(socket);
    }
    await sleep(200);  // every connection is on a worker, waiting for the rest of its head
    const t0 = performance.now();
    const health = await small.get('/health');
    const ms = performance.now() - t0;
    assert.equal(health.status, 200);
    assert.ok(ms < 2000, `/health took ${Math.round(ms)} ms behind 60 idle connections`);
    const chat = await small.post('/v1/chat/completions', { messages: MESSAGES, max_tokens: 2 });
    assert.equal(chat.status, 200, chat.text);
  } finally {
    for (const socket of sockets) socket.destroy();
    await small.stop();
  }
});

test('unknown model: 404 model_not_found naming it, on both generation routes and through the client', async () => {
  for (const [route, body] of [
    ['/v1/chat/completions', { model: 'nonexistent', messages: MESSAGES, max_tokens: 2 }],
    ['/v1/completions', { model: 'nonexistent', prompt: 'Hi', max_tokens: 2 }],
    ['/v1/chat/completions', { model: 'nonexistent', messages: MESSAGES, max_tokens: 2, stream: true }],
  ]) {
    const res = await server.post(route, body);
    assert.equal(res.status, 404, `${route}: ${res.text}`);
    const e = res.json?.error;
    assert.ok(e, `OpenAI error body: ${res.text}`);
    assert.equal(e.message, 'The model `nonexistent` does not exist.');
    assert.equal(e.param, 'model');
    // OpenAI's unknown-model error: invalid_request_error / model_not_found.
    assert.equal(e.type, 'invalid_request_error');
    assert.equal(e.code, 'model_not_found');
  }
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt-4o', messages: MESSAGES, max_tokens: 2 }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404 && err.param === 'model',
  );
});

test('served name, alias and an absent model are accepted; /v1/models lists the names', async () => {
  const models = await server.get('/v1/models');
  assert.deepEqual(models.json.data.map((m) => m.id), [SERVED, ALIAS]);
  for (const [model, reported] of [[SERVED, SERVED], [ALIAS, ALIAS], [undefined, SERVED], [null, SERVED]]) {
    const res = await server.post('/v1/chat/completions', { model, messages: MESSAGES, max_tokens: 2 });
    assert.equal(res.status, 200, `model ${model}: ${res.text}`);
    assert.equal(res.json.model, reported);
  }
});

/** Sends raw request bytes and reads one response (head + Content-Length body), without waiting for EOF. */
function rawRequest(port, bytes, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const sock = net.connect(port, '127.0.0.1', () => sock.write(bytes));
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => { sock.destroy(); resolve({ timedOut: true, ms: performance.now() - t0 }); }, timeoutMs);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const head = buf.indexOf('\r\n\r\n');
      if (head < 0) return;
      const headers = buf.subarray(0, head).toString('latin1');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(headers)?.[1] ?? 0);
      if (buf.length < head + 4 + length) return;
      clearTimeout(timer);
      sock.destroy();
      const text = buf.subarray(head + 4, head + 4 + length).toString('utf8');
      let json;
      try { json = JSON.parse(text); } catch { /* not JSON */ }
      resolve({ status: Number(headers.split(' ')[1]), headers, text, json, ms: performance.now() - t0 });
    });
    sock.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
}

test('a head above 64 KiB: the 431 the client gets is what the log line says (not a 400)', async () => {
  const marker = `big-head-${Date.now()}`;
  const res = await rawExchange(server.port, [`GET /health?${marker} HTTP/1.1\r\nHost: x\r\nX-Big: ${'y'.repeat(70000)}\r\n\r\n`],
                                { stall: true, timeoutMs: 5000 });
  assert.equal(res.status, 431, res.headers);
  const deadline = Date.now() + 3000;
  let line;
  const find = () => server.stderrLines().map((l) => { try { return JSON.parse(l); } catch { return null; } })
    .filter((r) => r?.status === 431 || r?.error_code === 'malformed_request');
  while ((line = find()).length === 0 && Date.now() < deadline) await sleep(20);
  assert.equal(line.length, 1, JSON.stringify(line));
  assert.equal(line[0].status, 431);
  assert.equal(line[0].error_code, 'request_header_too_large');
});

test('an unknown method is a 501, an unparsable head a 400; both close the connection at once', async () => {
  for (const [bytes, status, code] of [
    ['FOO /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n', 501, 'method_not_implemented'],  // RFC 9110 9.1
    ['TRACE /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n', 501, 'method_not_implemented'],
    ['HELLO\r\n\r\n', 400, 'malformed_request'],
    ['GET /health HTTP/1.1\nHost: x\n\n', 400, 'malformed_request'],  // RFC 9112 2.2: lines end in CRLF
    ['PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 400, 'malformed_request'],  // an HTTP/2 preface
  ]) {
    const res = await rawExchange(server.port, [bytes], { stall: true, timeoutMs: 5000 });
    assert.equal(res.status, status, `${JSON.stringify(bytes)}: ${res.headers}`);
    assert.equal(res.json?.error?.code, code, JSON.stringify(res.json));
    assert.ok(res.closed && res.ms < 2000, `closed after ${Math.round(res.ms)} ms (${res.closed})`);
    assert.equal(res.headers.match(/\r\nConnection:/gi)?.length, 1, res.headers);
  }
  // Under /v1/messages, Anthropic's shape (the path comes from the refused request line's target).
  const brew = await rawExchange(server.port, ['BREW /v1/messages HTTP/1.1\r\nHost: x\r\n\r\n'], { stall: true, timeoutMs: 5000 });
  assert.equal(brew.status, 501, brew.headers);
  assert.equal(brew.json?.type, 'error', JSON.stringify(brew.json));
  // A rejection of a request that asked to close: one Connection header (httplib added a second).
  const res = await rawExchange(server.port, ['POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'],
                                { stall: true, timeoutMs: 5000 });
  assert.equal(res.status, 411, res.headers);
  assert.equal(res.headers.match(/\r\nConnection:/gi)?.length, 1, res.headers);
});

test('Content-Length: -5 (and other non-numbers) gets a prompt 400 with an OpenAI error', async () => {
  for (const value of ['-5', '12abc', '+5', '5, 5']) {
    const res = await rawRequest(server.port,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${value}\r\n\r\n`);
    assert.ok(!res.timedOut, `Content-Length ${value}: no reply within 5 s`);
    assert.equal(res.status, 400, `Content-Length ${value}: ${res.headers}\n${res.text}`);
    assert.ok(res.ms < 2000, `answered after ${res.ms.toFixed(0)} ms`);
    assert.match(res.json?.error?.message ?? '', /Content-Length/, res.text);
    assert.match(res.headers, /\r\nConnection: close/i, 'the body cannot be delimited: the connection is closed');
    assert.doesNotMatch(res.headers, /\r\nKeep-Alive:/i, 'no keep-alive advertised next to Connection: close');
  }
});

test('rejected requests get one JSON log line each (status, error type, no token counts)', async () => {
  const marker = `nonexistent-${Date.now()}`;
  const rejected = await server.post('/v1/chat/completions', { model: marker, messages: MESSAGES, max_tokens: 2 });
  assert.equal(rejected.status, 404);
  const bad = await server.post('/v1/chat/completions', { model: SERVED, messages: MESSAGES, temperature: 9 });
  assert.equal(bad.status, 400);
  const ok = await server.post('/v1/chat/completions', { model: SERVED, messages: MESSAGES, max_tokens: 2 });
  assert.equal(ok.status, 200);

  let lines = [];
  const deadline = Date.now() + 3000;
  for (;;) {
    lines = server.stderrLines().filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    if (lines.some((l) => l.id === ok.json.id) || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const notFound = lines.filter((l) => l.status === 404 && l.error?.includes(marker));
  assert.equal(notFound.length, 1, `one line for the 404: ${JSON.stringify(lines)}`);
  assert.equal(notFound[0].path, '/v1/chat/completions');
  assert.equal(notFound[0].method, 'POST');
  assert.equal(typeof notFound[0].error_type, 'string');
  for (const field of ['prompt_tokens', 'completion_tokens', 'ttft_ms']) assert.ok(!(field in notFound[0]), field);
  const badLines = lines.filter((l) => l.status === 400 && l.error?.includes('temperature'));
  assert.equal(badLines.length, 1, `one line for the 400: ${JSON.stringify(lines)}`);
  assert.equal(badLines[0].error_type, 'invalid_request_error');
  assert.ok(lines.some((l) => l.status === 400 && /Content-Length/.test(l.error)), 'the Content-Length 400s were logged');
  // With --log-format json every stderr line is JSON, the lifecycle lines included.
  const all = server.stderrLines().filter((l) => l.trim() !== '');
  for (const l of all) assert.doesNotThrow(() => JSON.parse(l), `not JSON: ${l}`);
  const serving = all.map((l) => JSON.parse(l)).find((l) => l.level === 'info' && /^serving /.test(l.message));
  assert.ok(serving, `the serving line: ${all.join('\n')}`);
  assert.match(serving.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  // The completed request keeps its line format.
  const done = lines.find((l) => l.id === ok.json.id);
  assert.ok(done, 'log line of the completed request');
  for (const field of ['status', 'finish_reason', 'prompt_tokens', 'completion_tokens', 'e2e_ms']) assert.ok(field in done, field);
});

test('a declared body above --max-body-bytes gets 413 at once; a POST without a length gets 411', async () => {
  // RFC 9110 15.5.14 / 15.5.12: decided from the headers, not after waiting for the body.
  const head = 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n';
  for (const [extra, status, code] of [['Content-Length: 2000000000\r\n\r\n{}', 413, 'request_too_large'],
                                       ['\r\n', 411, 'length_required']]) {
    const res = await rawRequest(server.port, head + extra);
    assert.ok(!res.timedOut, `${status}: no reply within 5 s`);
    assert.equal(res.status, status, res.headers);
    assert.ok(res.ms < 2000, `${status}: answered after ${res.ms.toFixed(0)} ms`);
    assert.equal(res.json?.error?.code, code, res.text);
  }
  const after = await server.post('/v1/chat/completions', { model: SERVED, messages: MESSAGES, max_tokens: 2 });
  assert.equal(after.status, 200, 'the server keeps serving');
});

test('a wrong-typed "cache" is a 400 naming it even with the response cache off', async () => {
  for (const route of ['/v1/chat/completions', '/v1/completions']) {
    const body = route.endsWith('chat/completions') ? { messages: MESSAGES } : { prompt: 'Hello' };
    const res = await server.post(route, { ...body, max_tokens: 2, cache: 'yes' });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json.error.param, 'cache');
    assert.equal((await server.post(route, { ...body, max_tokens: 2, cache: false })).status, 200);
  }
});

test('PUT / PATCH / DELETE without a length are answered at once (405 / 404); Transfer-Encoding in any case', async () => {
  // cpp-httplib would read these bodies until the client closes (the 10-s read timeout).
  for (const [method, path, status] of [['PUT', '/v1/chat/completions', 405], ['PATCH', '/v1/models', 405],
                                        ['DELETE', '/v1/no-such-route', 404]]) {
    const res = await rawRequest(server.port, `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    assert.ok(!res.timedOut, `${method} ${path}: no reply within 5 s`);
    assert.equal(res.status, status, res.headers);
    assert.ok(res.ms < 2000, `${method}: answered after ${res.ms.toFixed(0)} ms`);
    assert.equal(typeof res.json?.error?.message, 'string', res.text);
    if (status === 405) assert.match(res.headers, /\r\nallow: /i);
  }
  // RFC 9112 section 7: coding names are case-insensitive; section 6.1: others are 501.
  const body = JSON.stringify({ model: SERVED, messages: MESSAGES, max_tokens: 2 });
  const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  const head = 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n';
  const ok = await rawRequest(server.port, `${head}Transfer-Encoding: Chunked\r\n\r\n${chunked}`, 30000);
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.object, 'chat.completion');
  const gz = await rawRequest(server.port, `${head}Transfer-Encoding: gzip, chunked\r\n\r\n${chunked}`);
  assert.equal(gz.status, 501, gz.text);
  assert.equal(gz.json.error.code, 'unsupported_transfer_encoding');
});

/**
 * Writes `chunks` (stopping at the first write error), then half-closes unless `stall` (then it
 * waits with the connection open); resolves with what came back: at the server's close, at
 * `timeoutMs`, or, with `oneResponse`, as soon as one whole response (head + Content-Length bytes)
 * is in (for a server that rightly keeps the connection alive after answering). `closed`: the
 * server closed (or reset) the connection; `ms`: from connecting to then.
 */
function rawExchange(port, chunks, { timeoutMs = 10000, stall = false, oneResponse = false } = {}) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const sock = net.connect(port, '127.0.0.1', async () => {
      for (const c of chunks) {
        if (sock.destroyed) break;
        await new Promise((done) => sock.write(c, () => done()));
      }
      if (!sock.destroyed && !stall) sock.end();
    });
    let buf = Buffer.alloc(0);
    const finish = (closed) => {
      clearTimeout(timer);
      sock.destroy();
      const text = buf.toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      let json;
      try { json = JSON.parse(text.slice(head + 4)); } catch { /* not JSON */ }
      resolve({ status: Number(text.split(' ')[1]), headers: text.slice(0, head), json, text, closed, ms: performance.now() - t0 });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    const complete = () => {
      const head = buf.indexOf('\r\n\r\n');
      if (head < 0) return false;
      const length = /\r\ncontent-length: *(\d+)/i.exec(buf.subarray(0, head).toString('latin1'));
      return length !== null && buf.length >= head + 4 + Number(length[1]);
    };
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (oneResponse && complete()) finish(false);
    });
    sock.on('end', () => finish(true));
    sock.on('error', () => finish(true));  // a reset after the reply (the server shut the connection down)
  });
}

test('a chunked body past --max-body-bytes gets 413; a body cut short of its Content-Length gets 408', async () => {
  // cpp-httplib 0.11 reads chunked bodies without a limit; the server caps them on the wire.
  const head = 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n';
  const piece = 'x'.repeat(1 << 20);
  const chunks = [head + 'Transfer-Encoding: chunked\r\n\r\n'];
  for (let i = 0; i < 12; ++i) chunks.push(`${piece.length.toString(16)}\r\n${piece}\r\n`);  // 12 MiB > 8 MiB
  chunks.push('0\r\n\r\n');
  const big = await rawExchange(server.port, chunks);
  assert.equal(big.status, 413, big.text.slice(0, 300));
  assert.equal(big.json?.error?.code, 'request_too_large', big.text.slice(0, 300));
  // RFC 9110 15.5.9: the client stopped sending before its declared length; the server's 10-s
  // read timeout ends the wait (a client that closes its side gets no reply at all).
  const short = await rawExchange(server.port, [head + 'Content-Length: 100\r\n\r\n{"messages":'],
                                  { stall: true, timeoutMs: 20000 });
  assert.equal(short.status, 408, short.text);
  assert.equal(short.json?.error?.code, 'request_timeout', short.text);
  assert.match(short.json?.error?.message ?? '', /12 of 100 bytes/, short.text);
  // A small chunked body still works.
  const body = JSON.stringify({ model: SERVED, messages: MESSAGES, max_tokens: 2 });
  const ok = await rawExchange(server.port, [head + 'Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n',
                                             `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`],
                                 { stall: true });  // a half-closed client counts as gone (disconnect probe)
  assert.equal(ok.status, 200, ok.text);
  const after = await server.post('/v1/chat/completions', { model: SERVED, messages: MESSAGES, max_tokens: 2 });
  assert.equal(after.status, 200, 'the server keeps serving');
});

test('a rejected body is never read as a next request; both framings at once are refused and the connection closed', async () => {
  // RFC 9112 9.6: after a response with "Connection: close" the server reads no further request.
  // cpp-httplib 0.11 closed only on the client's own "Connection: close" and parsed the unread body
  // as the next request (a second answer, 431 or 414, and a request counted that was never made).
  const head = 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n';
  const countResponses = (text) => (text.match(/HTTP\/1\.1 \d{3} /g) || []).length;
  const nine = 9 << 20;  // above the default --max-body-bytes of 8 MiB
  const over = await rawExchange(server.port, [head + `Content-Length: ${nine}\r\n\r\n`, 'x'.repeat(nine)], { stall: true });
  assert.equal(over.status, 413, over.text.slice(0, 300));
  assert.equal(countResponses(over.text), 1, over.text.slice(0, 600));
  // RFC 9112 6.1: Content-Length and Transfer-Encoding together: refused, then the connection ends
  // (the client keeps it open: the close comes from the server).
  const both = await rawExchange(server.port, [head + 'Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n'],
                                 { stall: true });
  assert.equal(both.status, 400, both.text);
  assert.equal(both.json?.error?.code, 'invalid_content_length', both.text);
  assert.match(both.headers, /connection: close/i);
  assert.equal(countResponses(both.text), 1, both.text);
  const metrics = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
  assert.ok(!/qwenserve_http_requests_total\{status="41[4]"\}/.test(metrics), 'no 414 counted for a request never made');
  const after = await server.post('/v1/chat/completions', { model: SERVED, messages: MESSAGES, max_tokens: 2 });
  assert.equal(after.status, 200, 'the server keeps serving');
});

test('chunked bodies: the decoded body is held to --max-body-bytes, and /v1/messages gets its 413 in Anthropic\'s shape', async () => {
  const chunked = (path, mib) => {
    const piece = 'x'.repeat(1 << 20);
    const chunks = [`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`];
    for (let i = 0; i < mib; ++i) chunks.push(`${piece.length.toString(16)}\r\n${piece}\r\n`);
    chunks.push(`${(1 << 19).toString(16)}\r\n${'x'.repeat(1 << 19)}\r\n0\r\n\r\n`);
    return chunks;
  };
  // 8.5 MiB decoded: within the wire allowance for chunk framing, above the 8 MiB limit itself.
  // The client keeps its side open (a half-closed client counts as gone and gets no reply); the
  // server keeps the connection alive after this 413 (the body was read whole), so the exchange
  // ends once the whole response is in. (A fixed 3-s wait failed CI on a loaded machine.)
  const exchange = { stall: true, oneResponse: true, timeoutMs: 30000 };
  const slightly = await rawExchange(server.port, chunked('/v1/chat/completions', 8), exchange);
  assert.equal(slightly.status, 413, slightly.text.slice(0, 300));
  assert.equal(slightly.json?.error?.code, 'request_too_large', slightly.text.slice(0, 300));
  // Anthropic's error shape on its route, whether the cap is met on the wire or after decoding.
  for (const mib of [8, 12]) {
    const res = await rawExchange(server.port, chunked('/v1/messages', mib), exchange);
    assert.equal(res.status, 413, res.text.slice(0, 300));
    assert.equal(res.json?.type, 'error', res.text.slice(0, 300));
    assert.equal(res.json?.error?.type, 'request_too_large', res.text.slice(0, 300));
  }
});

test('GET /v1/models/{model}: the model object for served names, 404 model_not_found otherwise', async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'unused' });
  for (const name of [SERVED, ALIAS]) {
    const model = await client.models.retrieve(name);
    assert.equal(model.id, name);
    assert.equal(model.object, 'model');
  }
  await assert.rejects(client.models.retrieve('nonexistent'),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404);
});

test('chat-template fields with a wrong type get a 400 naming them; unknown fields are ignored', async () => {
  // vLLM's add_generation_prompt / continue_final_message (booleans) and chat_template_kwargs
  // (an object): a wrong type is a 400 invalid_request_error with the field as param, never a 500.
  for (const route of ['/tokenize', '/v1/chat/completions']) {
    for (const [field, value] of [['add_generation_prompt', 'yes'], ['continue_final_message', 1],
                                  ['chat_template_kwargs', ['enable_thinking']]]) {
      const res = await server.post(route, { messages: MESSAGES, max_tokens: 2, [field]: value });
      assert.equal(res.status, 400, `${route} ${field}=${JSON.stringify(value)}: ${res.text}`);
      assert.equal(res.json?.error?.type, 'invalid_request_error');
      assert.equal(res.json?.error?.param, field);
    }
  }
  // Fields OpenAI SDKs and agent frameworks send that we do not use.
  const ok = await server.post('/v1/chat/completions', {
    messages: [{ role: 'user', content: 'Hi', name: 'bob', cache_control: { type: 'ephemeral' } }], max_tokens: 2,
    user: 'u-1', metadata: { k: 'v' }, store: false, service_tier: 'auto', some_future_field: [1, 2],
  });
  assert.equal(ok.status, 200, ok.text);
});

test('continue_final_message: the prompt ends with the final message, open for the model to continue', async () => {
  const messages = [...MESSAGES, { role: 'assistant', content: 'Once upon a' }];
  const tok = await server.post('/tokenize', { messages, add_generation_prompt: false, continue_final_message: true });
  assert.equal(tok.status, 200, tok.text);
  const text = await server.post('/detokenize', { tokens: tok.json.tokens });
  assert.ok(text.json.prompt.endsWith('Once upon a'), JSON.stringify(text.json.prompt));
  const closed = await server.post('/tokenize', { messages, add_generation_prompt: false });
  assert.ok(closed.json.count > tok.json.count, 'without it the final message is closed (end of turn)');
  const both = await server.post('/v1/chat/completions', { messages, continue_final_message: true, max_tokens: 2 });
  assert.equal(both.status, 400, 'add_generation_prompt defaults to true and cannot be combined with it');
  assert.equal(both.json?.error?.param, 'continue_final_message');
  const res = await server.post('/v1/chat/completions', { messages, add_generation_prompt: false, continue_final_message: true, max_tokens: 2 });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.usage.prompt_tokens, tok.json.count, 'the completion runs on the same prompt');
});

test('SIGTERM during startup stops the server instead of leaving one that ignores SIGTERM', async () => {
  for (const delayMs of [20, 100, 400]) {
    const model = await makeTinyModel();
    const port = await freePort();
    const proc = spawn(QS_BIN, ['serve', '--model', model, '--threads', '2', '--port', String(port)],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d) => { stderr += d; });
    proc.stdout.resume();
    await new Promise((r) => setTimeout(r, delayMs));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 20000);
    const [code, signal] = await once(proc, 'exit');
    clearTimeout(timer);
    // Before the signal mask is set up the default action ends it (signal SIGTERM); after, the
    // drain does (exit 0). Never SIGKILL: that means it ignored SIGTERM.
    assert.notEqual(signal, 'SIGKILL', `SIGTERM after ${delayMs} ms: still running after 20 s; stderr:\n${stderr}`);
    assert.ok(code === 0 || signal === 'SIGTERM', `SIGTERM after ${delayMs} ms: code ${code}, signal ${signal}; stderr:\n${stderr}`);
  }
});

test('a compressed body is a 415 before it is read; a wrong-typed "type" is a 400, never a 500', async () => {
  // 1 KB of gzip that would inflate to 1 MB: refused from the headers (RFC 9110 15.5.16).
  const { gzipSync } = await import('node:zlib');
  const body = gzipSync(JSON.stringify({ messages: [{ role: 'user', content: 'a'.repeat(1 << 20) }] }));
  for (const [route, anthropic] of [['/v1/chat/completions', false], ['/v1/messages', true]]) {
    const res = await server.request('POST', route, { rawBody: body,
      headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' } });
    assert.equal(res.status, 415, `${route}: ${res.text}`);
    if (anthropic) assert.equal(res.json?.type, 'error', res.text);
    else assert.equal(res.json?.error?.code, 'unsupported_content_encoding', res.text);
  }
  for (const [route, body] of [
    ['/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 1 }] }], max_tokens: 1 }],
    ['/v1/chat/completions', { messages: MESSAGES, tool_choice: { type: 1 }, max_tokens: 1 }],
    ['/v1/responses', { input: 'hi', tools: [{ type: 1 }] }],
    ['/v1/responses', { input: 'hi', tool_choice: { type: null } }],
  ]) {
    const res = await server.post(route, body);
    assert.equal(res.status, 400, `${route} ${JSON.stringify(body)}: ${res.text}`);
    assert.equal(res.json?.error?.type, 'invalid_request_error', res.text);
  }
  const after = await server.post('/v1/chat/completions', { model: SERVED, messages: MESSAGES, max_tokens: 2 });
  assert.equal(after.status, 200, 'the server keeps serving');
});
