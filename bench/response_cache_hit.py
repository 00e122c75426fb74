#!/usr/bin/env python3
"""Response-cache hit latency while the engine is fully loaded (issue 12's target: E2E P99 < 20 ms).

Starts `qwenserve serve --response-cache-size 64MiB` on MODEL, sends one deterministic chat request
(temperature 0) so that it is cached, then keeps the engine full with `qwenserve loadtest
--concurrency 2 x --max-num-seqs` (distinct prompts: misses that run on the engine) and meanwhile
sends the cached request REQUESTS times, one at a time, 50 ms apart, timing each end to end on
the client (connect, request, whole body; ms). Prints the latency percentiles, the
x-qwenserve-cache header values seen, and the engine's running / waiting request gauges sampled
halfway through (the load must have filled every slot, or the figure means nothing).

  bench/response_cache_hit.py MODEL [--requests 400] [--max-num-seqs 4] [--bin build/release/qwenserve]
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from soak import free_port, percentile, stop_server  # noqa: E402  (tools/soak.py)


def gauges(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = {}
    for line in text.splitlines():
        for name in ("qwenserve_num_requests_running", "qwenserve_num_requests_waiting"):
            if line.startswith(name + " "):
                out[name] = float(line.split()[1])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--max-num-seqs", type=int, default=4)
    ap.add_argument("--bin", default="build/release/qwenserve")
    a = ap.parse_args()
    port = free_port()
    server = subprocess.Popen([a.bin, "serve", "--model", a.model, "--port", str(port), "--max-num-seqs",
                               str(a.max_num_seqs), "--response-cache-size", "64MiB", "--log-format", "none"],
                              stderr=subprocess.DEVNULL)
    load = None
    try:
        while True:
            if server.poll() is not None:
                raise SystemExit(f"serve exited with {server.returncode}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/ready")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        body = json.dumps({"messages": [{"role": "user", "content": "What is a KV cache?"}],
                           "max_tokens": 32, "temperature": 0})

        def request():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            t0 = time.monotonic()
            c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            ms = (time.monotonic() - t0) * 1000
            c.close()
            if r.status != 200:
                raise SystemExit(f"HTTP {r.status}")
            return r.getheader("x-qwenserve-cache"), ms

        first = request()
        # A few hundred requests: loadtest sizes its prompts before it sends anything.
        load = subprocess.Popen([a.bin, "loadtest", "--url", f"http://127.0.0.1:{port}", "--concurrency",
                                 str(2 * a.max_num_seqs), "--num-requests", "1000", "--input-tokens", "256",
                                 "--output-tokens", "64", "--quiet", "--json"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while gauges(port).get("qwenserve_num_requests_running", 0) < a.max_num_seqs:
            if time.monotonic() > deadline or load.poll() is not None:
                raise SystemExit("the load never filled the engine's slots")
            time.sleep(0.2)
        lat, seen, mid = [], {}, {}
        for i in range(a.requests):
            header, ms = request()
            seen[header] = seen.get(header, 0) + 1
            lat.append(ms)
            if i == a.requests // 2:
                mid = gauges(port)
            time.sleep(0.05)
        if load.poll() is not None:
            raise SystemExit("loadtest ended before the probe did: raise --num-requests")
        print(json.dumps({
            "first": {"x-qwenserve-cache": first[0], "ms": round(first[1], 1)},
            "x-qwenserve-cache": seen,
            "requests": len(lat),
            "e2e_ms": {"p50": round(percentile(lat, 0.5), 2), "p95": round(percentile(lat, 0.95), 2),
                       "p99": round(percentile(lat, 0.99), 2), "max": round(max(lat), 2)},
            "engine_halfway": mid,
        }))
    finally:
        if load is not None and load.poll() is None:
            load.kill()
        stop_server(server)


if __name__ == "__main__":
    main()
