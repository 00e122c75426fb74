// End-to-end test of --allowed-origins (CORS, WHATWG Fetch standard) with --api-key: preflights
// from allowed origins are answered without the key, actual responses (errors and streams
// included) carry Access-Control-Allow-Origin and expose x-request-id, other origins get neither.
// Requests go through node:http so that Origin and the Access-Control-Request-* headers are sent
// as a browser sends them.
//
// Run: QS_BIN=build/release/qwenserve node --test tests/e2e/cors.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startServer, makeTinyModel, cleanWorkDir } from './server_harness.mjs';

const ALLOWED = 'http://localhost:5173';
const KEY = 'cors-key';
let server;

before(async () => {
  await makeTinyModel();
  server = await startServer(['--allowed-origins', `${ALLOWED},https://app.example.com`, '--api-key', KEY]);
});

after(async () => {
  if (server && !server.exit) await server.stop();
  cleanWorkDir();
});

/** One request over node:http; resolves {status, headers (lower-case names), body}. */
function send(method, path, headers = {}, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: server.port, method, path, headers }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { data += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    if (body !== undefined) req.end(body); else req.end();
  });
}

const list = (value) => (value ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);

test('a preflight from an allowed origin gets 2xx naming the method and headers, without the API key', async () => {
  const res = await send('OPTIONS', '/v1/chat/completions', {
    Origin: ALLOWED, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type',
  });
  assert.ok(res.status >= 200 && res.status < 300, `status ${res.status}: ${res.body}`);
  assert.equal(res.headers['access-control-allow-origin'], ALLOWED);
  assert.ok(list(res.headers['access-control-allow-methods']).includes('post'));
  for (const h of ['authorization', 'content-type']) assert.ok(list(res.headers['access-control-allow-headers']).includes(h), h);
  assert.ok(list(res.headers.vary).includes('origin'));
});

test('actual responses to an allowed origin carry Allow-Origin, errors and streams included', async () => {
  const body = JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  const json = { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) };
  const ok = await send('POST', '/v1/chat/completions', { ...json, Origin: ALLOWED, Authorization: `Bearer ${KEY}` }, body);
  assert.equal(ok.status, 200, ok.body);
  assert.equal(ok.headers['access-control-allow-origin'], ALLOWED);
  assert.ok(list(ok.headers['access-control-expose-headers']).includes('x-request-id'));
  assert.ok(ok.headers['x-request-id']);
  // A browser page reads only the headers exposed to it (WHATWG Fetch): the latency breakdown too.
  assert.ok(list(ok.headers['access-control-expose-headers']).includes('server-timing'));
  assert.ok(ok.headers['server-timing'], 'a non-streaming response carries Server-Timing');
  assert.equal(ok.headers['timing-allow-origin'], ALLOWED);

  const unauthorized = await send('POST', '/v1/chat/completions', { ...json, Origin: ALLOWED }, body);
  assert.equal(unauthorized.status, 401);
  assert.equal(unauthorized.headers['access-control-allow-origin'], ALLOWED, 'the page can read why it failed');
  assert.equal(JSON.parse(unauthorized.body).error.code, 'invalid_api_key');

  const streamBody = JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, stream: true });
  const stream = await send('POST', '/v1/chat/completions', {
    'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(streamBody), Origin: ALLOWED,
    Authorization: `Bearer ${KEY}`,
  }, streamBody);
  assert.equal(stream.status, 200);
  assert.match(stream.headers['content-type'], /^text\/event-stream/);
  assert.equal(stream.headers['access-control-allow-origin'], ALLOWED);
});

test('other origins get no Allow-Origin and their preflights are refused', async () => {
  const pre = await send('OPTIONS', '/v1/chat/completions', { Origin: 'https://evil.example', 'Access-Control-Request-Method': 'POST' });
  assert.equal(pre.status, 403);
  assert.equal(pre.headers['access-control-allow-origin'], undefined);
  const models = await send('GET', '/v1/models', { Origin: 'https://evil.example', Authorization: `Bearer ${KEY}` });
  assert.equal(models.status, 200, 'the server answers; the browser withholds the body from the page');
  assert.equal(models.headers['access-control-allow-origin'], undefined);
  const sameOrigin = await send('GET', '/health');
  assert.equal(sameOrigin.headers['access-control-allow-origin'], undefined, 'no Origin: not a CORS request');
});
