#!/usr/bin/env python3
"""A static mock of qwenserve's HTTP API for working on the web UI without a model.

    python3 web/dev/mock_server.py [--port 8765] [--token-ms 25] [--ttft-ms 150]
    then open http://127.0.0.1:8765/ (chat) and http://127.0.0.1:8765/dashboard

Serves the pages from web/ and the libraries from their Debian paths at the same URLs as the
embedded assets (web/CMakeLists.txt), plus fake endpoints:
  GET  /v1/models             one model, "Qwen3-4B-Instruct-2507 (mock)"
  POST /v1/chat/completions   SSE stream of chat.completion.chunk objects (role delta, a ":" comment,
                              content deltas, finish_reason, usage chunk, "data: [DONE]"); the last
                              user message picks the scenario:
                                contains "think"        reasoning_content deltas before the answer
                                contains "error"        HTTP 400 with an OpenAI-shaped error body
                                contains "midstream"    an error event after a few deltas
                                contains "long"/"slow"  a long, slow reply (to try the Stop button)
                                otherwise               a Markdown reply (list, table, code blocks)
                              "stream": false returns one chat.completion object.
  GET  /stats                 synthetic, slowly varying latency quantiles, throughput, queue and KV
                              cache usage (--sparse leaves some fields out now and then).
Standard library only.
"""
import argparse
import json
import math
import os
import random
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WEB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# URL path -> file; keep in step with the manifest in web/CMakeLists.txt.
FILES = {
    "/": "index.html",
    "/index.html": "index.html",
    "/dashboard": "dashboard.html",
    "/dashboard.html": "dashboard.html",
    "/app.js": "app.js",
    "/dashboard.js": "dashboard.js",
    "/style.css": "style.css",
    "/favicon.svg": "favicon.svg",
    "/vendor/marked.min.js": "/usr/share/javascript/marked/marked.min.js",
    "/vendor/purify.min.js": "/usr/share/nodejs/dompurify/dist/purify.min.js",
    "/vendor/highlight.min.js": "/usr/share/javascript/highlight.js/highlight.min.js",
    "/vendor/hljs-light.css": "/usr/share/javascript/highlight.js/styles/atom-one-light.css",
    "/vendor/hljs-dark.css": "/usr/share/javascript/highlight.js/styles/atom-one-dark.css",
    "/vendor/chart.min.js": "/usr/share/javascript/chart.js/chart.min.js",
}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
MODEL = "Qwen3-4B-Instruct-2507 (mock)"

MARKDOWN_REPLY = """Here is a short answer with some **Markdown**, to check the rendering.

1. Streaming works token by token.
2. `inline code` and *emphasis* render.
3. Links open in a new tab: [qwenserve](https://example.com).

| metric | meaning |
| --- | --- |
| TTFT | time to first token |
| ITL | inter-token latency |

```python
def fib(n: int) -> int:
    # Iterative Fibonacci.
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
```

```cpp
#include <cstdio>
int main() { std::printf("hello %d\\n", 42); }
```

> Request: {params}. This conversation has {turns} message(s).
"""

REASONING = ("The user wants a quick check. I should think about it step by step: first restate "
             "the question, then answer briefly, and finally give an example.")

LONG_REPLY = " ".join(f"Sentence {i} of a long reply that streams slowly, so there is time to press Stop."
                      for i in range(1, 400))


def tokens_of(text):
    """Rough 'tokens': words with their leading whitespace."""
    return re.findall(r"\s*\S+|\s+", text)


class Handler(BaseHTTPRequestHandler):
    server_version = "qwenserve-mock/0.1"

    def log_message(self, fmt, *args):
        if not self.server.quiet:
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    # ------------------------------------------------------------ helpers

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def send_error_json(self, status, message, type_, param=None, code=None):
        self.send_json(status, {"error": {"message": message, "type": type_, "param": param, "code": code}})

    def sse(self, obj):
        data = obj if isinstance(obj, str) else json.dumps(obj)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    # ------------------------------------------------------------ GET

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path in FILES:
            file = FILES[path]
            file = file if os.path.isabs(file) else os.path.join(WEB_DIR, file)
            with open(file, "rb") as f:
                body = f.read()
            self.send_response(200)
            self.send_header("Content-Type", TYPES.get(os.path.splitext(file)[1], "application/octet-stream"))
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            self.wfile.write(body)
        elif path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": int(time.time()), "owned_by": "qwenserve"}]})
        elif path == "/stats":
            self.send_json(200, self.server.stats())
        else:
            self.send_error_json(404, f"no route for GET {path}", "not_found_error")

    # ------------------------------------------------------------ POST

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        if path != "/v1/chat/completions":
            self.send_error_json(404, f"no route for POST {path}", "not_found_error")
            return
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        except json.JSONDecodeError as e:
            self.send_error_json(400, f"invalid JSON body: {e}", "invalid_request_error")
            return
        messages = req.get("messages") or []
        if not messages:
            self.send_error_json(400, "'messages' must be a non-empty array", "invalid_request_error", "messages")
            return
        last = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        low = last.lower()
        if "error" in low and "midstream" not in low:
            self.send_error_json(400, "temperature must be between 0 and 2 (mock error)",
                                 "invalid_request_error", "temperature", "invalid_value")
            return

        params = ", ".join(f"{k}={req[k]}" for k in ("temperature", "top_p", "max_tokens") if k in req)
        reasoning = tokens_of(REASONING) if "think" in low else []
        if "long" in low or "slow" in low:
            content = tokens_of(LONG_REPLY)
        else:
            content = tokens_of(MARKDOWN_REPLY.replace("{params}", params or "defaults")
                                .replace("{turns}", str(len(messages))))
        max_tokens = int(req.get("max_tokens") or 1 << 30)
        finish = "stop"
        if len(reasoning) + len(content) > max_tokens:
            reasoning = reasoning[:max_tokens]
            content = content[:max(0, max_tokens - len(reasoning))]
            finish = "length"
        prompt_tokens = sum(len(tokens_of(str(m.get("content", "")))) for m in messages) + 4 * len(messages)
        cid = "chatcmpl-mock%08x" % random.getrandbits(32)
        created = int(time.time())

        if not req.get("stream"):
            time.sleep(self.server.ttft_ms / 1000)
            self.send_json(200, {
                "id": cid, "object": "chat.completion", "created": created, "model": MODEL,
                "choices": [{"index": 0, "finish_reason": finish, "message": {
                    "role": "assistant", "content": "".join(content),
                    **({"reasoning_content": "".join(reasoning)} if reasoning else {})}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(reasoning) + len(content),
                          "total_tokens": prompt_tokens + len(reasoning) + len(content)}})
            return

        def chunk(delta, finish_reason=None):
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        token_s = self.server.token_ms / 1000 * (4 if "slow" in low else 1)
        try:
            self.wfile.write(b": mock stream start\n\n")
            self.sse(chunk({"role": "assistant", "content": ""}))
            time.sleep(self.server.ttft_ms / 1000)
            n = 0
            for t in reasoning:
                self.sse(chunk({"reasoning_content": t}))
                n += 1
                time.sleep(token_s)
            for t in content:
                self.sse(chunk({"content": t}))
                n += 1
                if n % 20 == 0:
                    self.wfile.write(b": keep-alive\n\n")
                if "midstream" in low and n == 12:
                    self.sse({"error": {"message": "the engine ran out of KV cache blocks (mock)",
                                        "type": "server_error", "param": None, "code": "kv_cache_full"}})
                    return
                time.sleep(token_s)
            self.sse(chunk({}, finish))
            if (req.get("stream_options") or {}).get("include_usage"):
                self.sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL,
                          "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                                                   "total_tokens": prompt_tokens + n}})
            self.sse("[DONE]")
        except (BrokenPipeError, ConnectionResetError):
            self.log_message("client closed the stream (stop)")


class MockServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr, args):
        super().__init__(addr, Handler)
        self.token_ms = args.token_ms
        self.ttft_ms = args.ttft_ms
        self.quiet = args.quiet
        self.sparse = args.sparse
        self.t0 = time.time()
        self.lock = threading.Lock()
        self.rng = random.Random(1)

    def stats(self):
        with self.lock:
            t = time.time() - self.t0
            r = self.rng.random
            load = 0.5 + 0.4 * math.sin(t / 20)  # 0.1 .. 0.9

            def summary(base, spread, count):
                p50 = base * (1 + 0.3 * load) * (0.95 + 0.1 * r())
                return {"count": count, "mean": p50 * 1.05, "p50": p50, "p90": p50 * (1.2 + spread * load),
                        "p95": p50 * (1.3 + spread * load), "p99": p50 * (1.5 + 2 * spread * load),
                        "max": p50 * (1.8 + 3 * spread * load)}

            def window(count):
                return {"ttft_ms": summary(90, 0.8, count), "itl_ms": summary(14, 0.3, count * 180),
                        "e2e_ms": summary(2600, 0.5, count)}

            out = {
                "window_requests": window(500),
                "window_60s": window(int(60 * 2.5 * load)),
                "requests_per_second": 2.5 * load * (0.9 + 0.2 * r()),
                "generation_tokens_per_second": 420 * load * (0.9 + 0.2 * r()),
                "running": int(round(12 * load)),
                "waiting": max(0, int(round(10 * (load - 0.6) + 2 * r()))),
                "kv_cache_usage": min(1.0, 0.15 + 0.7 * load + 0.05 * r()),
                # Issue 12: SLO attainment, prediction error, slowest requests, cache, degradation.
                "slo": {"ttft_s": 0.5, "itl_s": 0.05, "ttft_met": int(900 + 100 * t), "ttft_missed": int(5 + t * load),
                        "itl_met": int(950 + 100 * t), "itl_missed": int(2 + t * load / 2)},
                "prediction_error_ms": {"count": 256, "p10": -40 * load, "p50": 5 * r(), "p90": 60 * load},
                "slowest": [{"id": f"chatcmpl-mock{i:02d}", "e2e_ms": 4000 - 100 * i, "queue_ms": 300 * load,
                             "prefill_ms": 120 + i, "decode_ms": 3500 - 100 * i, "ttft_ms": 420 + i,
                             "predicted_ttft_ms": 400, "cached_tokens": 16 * (i % 3), "preemptions": i % 2,
                             "cache": "miss" if i % 4 else "", "degraded": load > 0.8} for i in range(20)],
                "response_cache": {"hit": int(30 * t), "miss": int(70 * t), "bypass": 1, "bytes": 123456},
                "degraded": {"now": load > 0.8, "requests": int(t * load), "share": 0.1 * load},
            }
            if self.sparse and r() < 0.3:
                for key in ("kv_cache_usage", "waiting", "window_60s"):
                    if r() < 0.5:
                        out.pop(key)
            return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--token-ms", type=float, default=25, help="delay between streamed deltas")
    ap.add_argument("--ttft-ms", type=float, default=150, help="delay before the first delta")
    ap.add_argument("--sparse", action="store_true", help="leave /stats fields out now and then")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    server = MockServer((args.host, args.port), args)
    print(f"mock qwenserve API on http://{args.host}:{server.server_address[1]}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
