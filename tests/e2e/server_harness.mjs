// Harness for the end-to-end tests of `qwenserve serve`: makes the tiny random-weight test model,
// starts servers on free loopback ports, waits for /ready, captures stderr (one JSON log line per
// finished request) and stops them with SIGTERM, reporting the exit status.
//
// Env:
//   QS_BIN            the qwenserve binary (default build/release/qwenserve in the repository)
//   QS_WORK_DIR       scratch directory (default: a fresh directory under the OS temp dir)
//   QS_TOKENIZER_DIR  directory with the Qwen3 tokenizer.json / tokenizer_config.json
//                     (default .cache/tokenizer-qwen3 in the repository)
//   QS_PYTHON         Python 3 with numpy for the model maker (default /usr/bin/python3)
//   QS_E2E_TIME_SCALE how many times slower than the release build the server under test runs
//                     (default 1; scripts/test.sh sets it for the ASan and TSan servers): tests
//                     multiply the waits that stand for "the server hangs" by it (scaled())
import { spawn, execFile } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createParser } from 'eventsource-parser';

const execFileAsync = promisify(execFile);

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const QS_BIN = path.resolve(REPO_ROOT, process.env.QS_BIN || 'build/release/qwenserve');
export const TOKENIZER_DIR = path.resolve(REPO_ROOT, process.env.QS_TOKENIZER_DIR || '.cache/tokenizer-qwen3');
const PYTHON = process.env.QS_PYTHON || '/usr/bin/python3';
/** QS_E2E_TIME_SCALE (>= 1; default 1). */
export const TIME_SCALE = Math.max(1, Number(process.env.QS_E2E_TIME_SCALE) || 1);
/** `ms` (a bound measured on the release build) times TIME_SCALE. */
export const scaled = (ms) => ms * TIME_SCALE;

let workDirCache = null;
/** Scratch directory for this run (QS_WORK_DIR/e2e-<pid>, or a fresh temp directory). */
export function workDir() {
  if (workDirCache) return workDirCache;
  if (process.env.QS_WORK_DIR) {
    workDirCache = path.join(path.resolve(process.env.QS_WORK_DIR), `e2e-${process.pid}`);
    fs.mkdirSync(workDirCache, { recursive: true });
  } else {
    workDirCache = fs.mkdtempSync(path.join(os.tmpdir(), 'qs-e2e-'));
  }
  return workDirCache;
}

/** Removes the scratch directory (call once at the end). */
export function cleanWorkDir() {
  if (workDirCache) fs.rmSync(workDirCache, { recursive: true, force: true });
  workDirCache = null;
}

let modelPromise = null;
/** Makes the tiny GGUF test model once per run and returns its path. */
export function makeTinyModel() {
  if (!modelPromise) {
    modelPromise = (async () => {
      if (!fs.existsSync(path.join(TOKENIZER_DIR, 'tokenizer.json'))) {
        throw new Error(`no tokenizer.json in ${TOKENIZER_DIR}: run tools/fetch-tokenizer.sh or set QS_TOKENIZER_DIR`);
      }
      const out = path.join(workDir(), 'tiny.gguf');
      await execFileAsync(PYTHON, [
        path.join(REPO_ROOT, 'tools', 'qwenserve-make-test-model'), '--config', 'tiny', '--format', 'gguf',
        '--dtype', 'f32', '--init-std', 'fan', '--tokenizer', TOKENIZER_DIR, '--seed', '1', '--out', out,
      ], { timeout: 120_000 });
      return out;
    })();
  }
  return modelPromise;
}

/** A free TCP port on 127.0.0.1 (bind a listener on port 0, read the port, close it). */
export async function freePort() {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return port;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const liveServers = new Set();
process.on('exit', () => {
  for (const s of liveServers) {
    try { s.proc.kill('SIGKILL'); } catch { /* already gone */ }
  }
});

export class Server {
  constructor(proc, port, args) {
    this.proc = proc;
    this.port = port;
    this.args = args;
    this.url = `http://127.0.0.1:${port}`;
    this.baseURL = `${this.url}/v1`;
    this.stderr = '';
    this.stdout = '';
    this.exit = null; // {code, signal} once exited
    this.exited = new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        this.exit = { code, signal };
        liveServers.delete(this);
        resolve(this.exit);
      });
    });
    proc.stderr.setEncoding('utf8');
    proc.stdout.setEncoding('utf8');
    proc.stderr.on('data', (d) => { this.stderr += d; });
    proc.stdout.on('data', (d) => { this.stdout += d; });
    liveServers.add(this);
  }

  /** Complete stderr lines so far. */
  stderrLines() {
    const lines = this.stderr.split('\n');
    lines.pop(); // incomplete (or empty) tail
    return lines;
  }

  /** The per-request JSON log lines (objects with id and e2e_ms) written so far. */
  logRecords() {
    const out = [];
    for (const line of this.stderrLines()) {
      const t = line.trim();
      if (!t.startsWith('{')) continue;
      let obj;
      try { obj = JSON.parse(t); } catch { continue; }
      if (obj && typeof obj === 'object' && 'id' in obj && 'e2e_ms' in obj) out.push(obj);
    }
    return out;
  }

  /** Waits until at least `n` log records exist (or timeout) and returns them all. */
  async waitForLogRecords(n, timeoutMs = 3000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const recs = this.logRecords();
      if (recs.length >= n || Date.now() > deadline) return recs;
      await sleep(20);
    }
  }

  /** The log record for response id `id` (waits for it up to timeoutMs). */
  async logRecordFor(id, timeoutMs = 3000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const rec = this.logRecords().find((r) => r.id === id);
      if (rec || Date.now() > deadline) return rec;
      await sleep(20);
    }
  }

  /** Sends SIGTERM and waits for the exit; returns {code, signal}. SIGKILLs after timeoutMs. */
  async stop(timeoutMs = 15000) {
    if (this.exit) return this.exit;
    // One SIGTERM: a second one during the drain makes the server exit at once (143).
    if (!this.proc.killed) this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    const result = await this.exited;
    clearTimeout(timer);
    return result;
  }

  // ---- HTTP helpers -------------------------------------------------------------------------

  /** fetch() against the server; returns {status, headers, text, json (or undefined)}. */
  async request(method, route, { body, headers = {}, rawBody, signal } = {}) {
    const init = { method, headers: { ...headers }, signal };
    if (rawBody !== undefined) {
      init.body = rawBody;
    } else if (body !== undefined) {
      init.body = JSON.stringify(body);
      if (!Object.keys(init.headers).some((h) => h.toLowerCase() === 'content-type')) {
        init.headers['Content-Type'] = 'application/json';
      }
    }
    const res = await fetch(this.url + route, init);
    const text = await res.text();
    let json;
    try { json = JSON.parse(text); } catch { json = undefined; }
    return { status: res.status, headers: res.headers, text, json };
  }

  post(route, body, opts = {}) { return this.request('POST', route, { ...opts, body }); }
  get(route, opts = {}) { return this.request('GET', route, opts); }

  /** GET /metrics parsed into a Map "name{labels}" -> number (labels as written). */
  async metrics() {
    const res = await this.get('/metrics');
    if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${res.text}`);
    return { text: res.text, values: parsePrometheus(res.text) };
  }

  /**
   * POSTs `body` and reads the answer as a strict SSE stream. Each event (bytes up to a blank
   * line) must be valid UTF-8 (TextDecoder fatal) and consist only of `data:` and comment lines;
   * eventsource-parser parses the decoded text and reports any error. Returns
   * {status, headers, events: [{data, json, bytes}], comments, done, text (the raw body)}.
   * `onEvent(event, ctl)` is called for every data event as it arrives; ctl.abort() aborts the
   * request (the returned promise then resolves with aborted: true).
   */
  async stream(route, body, { headers = {}, onEvent } = {}) {
    const controller = new AbortController();
    const res = await fetch(this.url + route, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', ...headers },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    const result = {
      status: res.status, headers: res.headers, events: [], comments: [], errors: [], aborted: false,
      text: '',
    };
    if (res.status !== 200 || !(res.headers.get('content-type') || '').startsWith('text/event-stream')) {
      result.text = await res.text();
      try { result.json = JSON.parse(result.text); } catch { /* not JSON */ }
      return result;
    }
    const pending = [];
    const parser = createParser({
      onEvent: (ev) => pending.push(ev),
      onComment: (c) => result.comments.push(c),
      onError: (err) => result.errors.push(`${err.type}: ${err.message}`),
      onRetry: (r) => result.errors.push(`unexpected retry field: ${r}`),
    });
    const decoder = new TextDecoder('utf-8', { fatal: true });
    let buf = new Uint8Array(0);
    let aborted = false;
    const ctl = { abort: () => { aborted = true; controller.abort(); } };
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const joined = new Uint8Array(buf.length + value.length);
        joined.set(buf);
        joined.set(value, buf.length);
        buf = joined;
        // Cut complete events: bytes up to and including a blank line ("\n\n").
        for (;;) {
          const end = indexOfBlankLine(buf);
          if (end < 0) break;
          const eventBytes = buf.slice(0, end);
          buf = buf.slice(end);
          let eventText;
          try {
            eventText = decoder.decode(eventBytes);
          } catch {
            result.errors.push(`event is not valid UTF-8: ${Buffer.from(eventBytes).toString('hex')}`);
            eventText = new TextDecoder('utf-8').decode(eventBytes);
          }
          result.text += eventText;
          for (const line of eventText.split('\n')) {
            if (line === '' || line.startsWith(':') || line.startsWith('data: ')) continue;
            result.errors.push(`unexpected SSE line: ${JSON.stringify(line)}`);
          }
          parser.feed(eventText);
          while (pending.length) {
            const ev = pending.shift();
            const item = { data: ev.data, bytes: eventBytes.length, event: ev.event, id: ev.id };
            if (ev.event !== undefined) result.errors.push(`unexpected event field: ${ev.event}`);
            if (ev.data !== '[DONE]') {
              try {
                item.json = JSON.parse(ev.data);
              } catch (e) {
                result.errors.push(`data is not JSON: ${JSON.stringify(ev.data)} (${e.message})`);
              }
            }
            result.events.push(item);
            if (onEvent && !aborted) onEvent(item, ctl);
          }
          if (aborted) break;
        }
        if (aborted) break;
      }
    } catch (e) {
      if (!aborted) throw e;
    }
    result.aborted = aborted;
    if (aborted) {
      reader.cancel().catch(() => {});
    } else if (buf.length) {
      result.errors.push(`stream ended inside an event: ${JSON.stringify(Buffer.from(buf).toString('utf8'))}`);
    }
    return result;
  }
}

/** Index just past the first "\n\n" (or "\r\n\r\n") in `buf`, or -1. */
function indexOfBlankLine(buf) {
  for (let i = 0; i + 1 < buf.length; i++) {
    if (buf[i] === 0x0a && buf[i + 1] === 0x0a) return i + 2;
    if (buf[i] === 0x0d && i + 3 < buf.length && buf[i + 1] === 0x0a && buf[i + 2] === 0x0d && buf[i + 3] === 0x0a) {
      return i + 4;
    }
  }
  return -1;
}

/** Prometheus text format -> Map of "name{labels}" (labels exactly as written) -> number. */
export function parsePrometheus(text) {
  const values = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)(?:\s+\S+)?$/.exec(line);
    if (!m) throw new Error(`unparsable metrics line: ${JSON.stringify(line)}`);
    const v = m[2] === '+Inf' ? Infinity : m[2] === '-Inf' ? -Infinity : Number(m[2]);
    values.set(m[1], v);
  }
  return values;
}

/**
 * Starts `qwenserve serve --model MODEL --port P --threads 2 ...extraArgs` on a free port and
 * waits until GET /ready answers 200. Retries with another port if the port was taken meanwhile.
 */
export async function startServer(extraArgs = [], { readyTimeoutMs = 60000, model } = {}) {
  if (!fs.existsSync(QS_BIN)) throw new Error(`QS_BIN ${QS_BIN} does not exist (build it or set QS_BIN)`);
  const modelPath = model || (await makeTinyModel());
  let lastError;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const args = ['serve', '--model', modelPath, '--port', String(port), '--threads', '2', ...extraArgs];
    const proc = spawn(QS_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const server = new Server(proc, port, args);
    const deadline = Date.now() + readyTimeoutMs;
    let ready = false;
    while (Date.now() < deadline && !server.exit) {
      try {
        const res = await fetch(`${server.url}/ready`);
        await res.arrayBuffer();
        if (res.status === 200) { ready = true; break; }
      } catch { /* not listening yet */ }
      await sleep(50);
    }
    if (ready) return server;
    if (!server.exit) {
      await server.stop();
      throw new Error(`server not ready after ${readyTimeoutMs} ms: ${args.join(' ')}\nstderr:\n${server.stderr}`);
    }
    await server.exited;
    lastError = new Error(`server exited (${JSON.stringify(server.exit)}) before ready: ${args.join(' ')}\nstderr:\n${server.stderr}`);
    if (!/bind|listen|address|in use/i.test(server.stderr)) break; // not a port race: do not retry
  }
  throw lastError;
}
