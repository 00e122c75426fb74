#!/usr/bin/python3
"""Soak test of `qwenserve serve` (scripts/soak.sh runs it): a mixed load at 60% of the measured
capacity (--load) for DURATION seconds, sampling the server every 10 s.

Load (open loop, Poisson arrivals, one thread per request): 30% non-streamed chat, 20%
completions, 25% streamed chat read to the end, 10% streamed requests cancelled after the first
token (the client closes the connection), 15% multi-turn chats that resend a shared long prefix
(prefix-cache hits). Capacity is measured first: requests of the same mix, --max-num-seqs at a
time, for CAL seconds; the rate is LOAD x completed / CAL. LOAD is 0.6, not 0.8: a shared 2-vCPU
CI machine drifts by up to 25% within a run, and at 0.8 a slow minute puts the server above 100%
of its capacity, where the queue (and with it P99) grows for reasons outside the server (CI run of
stop 20: window P99 604-2612 ms without any trend); at 0.6 a 25% slowdown still leaves it at 0.8.

Every 10 s: RssAnon, threads (/proc/PID/status), open fds (/proc/PID/fd), /stats kv_blocks and
the client-side P99 of the requests that completed in the window (end-to-end, ms).
Pass (after a warm-up of max(45 s, 20% of DURATION)): RssAnon drifts < 5% (last sample vs first
after warm-up; the mmapped weights are file-backed, not RssAnon; the KV cache is 2 MiB by default
so that every block has been touched once within the warm-up), fds and threads do not grow
(threads: last <= first after warm-up, the HTTP worker threads all start at bind; fds: once the
load has ended, polled for up to 15 s, <= the fewest sampled after warm-up), latency flat, no
request failed other than the deliberate cancellations, and the server is alive at the end.

Latency flat is judged on two closed-loop probes of the same mix (other seeds: the same prompts
would hit the prefix cache), --max-num-seqs at a time, CAL seconds each: the calibration before the
soak and a probe after it. After vs before: P50 within 1.5x + 20 ms, P99 within 2x + 50 ms,
throughput at least 1/1.5 of it. A closed loop holds at most --max-num-seqs requests, so its latency
is service time and moves in proportion to a slower machine; an open loop's latency is mostly
queueing, which a noisy shared CI machine blows up by bursts: CI run of stop 24 (a 2-vCPU VM) had
open-loop 10-s window P99s of 2337, 2331, 1862, 423, 855, 441, 488, 591, 751, 2312, 1022 ms, no
trend, and the pooled thirds rule (P50 179 -> 533 ms) failed. The open-loop thirds are still
printed, as information.

Usage: tools/soak.py --bin build/release/qwenserve --model tiny.gguf --duration 120 [--out samples.tsv]
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

PREFIX = "You are a careful assistant. " * 40  # ~240 tokens shared by the multi-turn chats


def stop_server(server):
    """SIGTERM to a `serve` process still running, then up to 30 s for its drain, then SIGKILL."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = []  # (end time, ms)
        self.ok = 0
        self.cancelled = 0
        self.failed = []

    def done(self, ms):
        with self.lock:
            self.ok += 1
            self.latencies.append((time.monotonic(), ms))

    def fail(self, what):
        with self.lock:
            self.failed.append(what)


def post(port, path, body, stream=False, cancel_after_first=False, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = json.dumps(body)
    conn.request("POST", path, data, {"Content-Type": "application/json"})
    res = conn.getresponse()
    if res.status != 200:
        text = res.read()[:200]
        conn.close()
        return res.status, text
    if not stream:
        res.read()
        conn.close()
        return 200, b""
    while True:
        line = res.fp.readline()
        if not line:
            break
        if cancel_after_first and line.startswith(b"data: {"):
            conn.sock.shutdown(socket.SHUT_RDWR)
            conn.close()
            return "cancelled", b""
        if line.strip() == b"data: [DONE]":
            break
    conn.close()
    return 200, b""


def one_request(port, rng, stats):
    kind = rng.random()
    n = rng.randint(8, 32)
    word = f"w{rng.randint(0, 10**6)}"
    t0 = time.monotonic()
    try:
        if kind < 0.30:
            status, text = post(port, "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": f"Tell me about {word}."}], "max_tokens": n})
        elif kind < 0.50:
            status, text = post(port, "/v1/completions", {"prompt": f"Once upon a time {word}", "max_tokens": n})
        elif kind < 0.75:
            status, text = post(port, "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": f"Stream {word}"}], "max_tokens": n, "stream": True},
                                stream=True)
        elif kind < 0.85:
            status, text = post(port, "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": f"Cancel {word}"}], "max_tokens": 64, "stream": True},
                                stream=True, cancel_after_first=True)
        else:
            msgs = [{"role": "system", "content": PREFIX}, {"role": "user", "content": "First question?"},
                    {"role": "assistant", "content": "A first answer."}, {"role": "user", "content": f"And {word}?"}]
            status, text = post(port, "/v1/chat/completions", {"messages": msgs, "max_tokens": n})
    except Exception as e:  # noqa: BLE001 - any client-side failure is a soak failure
        stats.fail(f"{type(e).__name__}: {e}")
        return
    if status == "cancelled":
        with stats.lock:
            stats.cancelled += 1
    elif status == 200:
        stats.done((time.monotonic() - t0) * 1000)
    else:
        stats.fail(f"HTTP {status}: {text!r}")


def proc_sample(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    rss_anon_kb = int(fields["RssAnon"].split()[0])
    threads = int(fields["Threads"])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss_anon_kb, threads, fds


def fd_links(pid):
    """What each open fd of `pid` points at (readlink of /proc/PID/fd/N), for a failure message."""
    out = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(f"{name}->{os.readlink(f'/proc/{pid}/fd/{name}')}")
        except OSError:
            pass
    return out


def get_json(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    body = conn.getresponse().read()
    conn.close()
    return json.loads(body)


def percentile(values, q):
    """Linear-interpolated q-quantile (numpy's default 'linear' method); NaN for no values."""
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def drive(port, rate, seconds, stats, rng, max_inflight=200):
    """Open loop: Poisson arrivals at `rate` req/s for `seconds`; returns the threads started."""
    threads = []
    end = time.monotonic() + seconds
    next_t = time.monotonic()
    while next_t < end:
        now = time.monotonic()
        if next_t > now:
            time.sleep(next_t - now)
        threads = [t for t in threads if t.is_alive()]
        if len(threads) < max_inflight:
            t = threading.Thread(target=one_request, args=(port, random.Random(rng.random()), stats), daemon=True)
            t.start()
            threads.append(t)
        next_t += rng.expovariate(rate)
    return threads


def closed_loop(port, concurrency, seconds, seed):
    """`concurrency` clients, each sending the next request of its own seeded sequence as soon as
    the last one ends, for `seconds`. Returns (requests/s completed or cancelled, Stats); the same
    seed gives the same request sequence per client."""
    stats = Stats()
    stop = time.monotonic() + seconds
    seeds = random.Random(seed)

    def worker(client_seed):
        r = random.Random(client_seed)
        while time.monotonic() < stop:
            one_request(port, r, stats)

    ts = [threading.Thread(target=worker, args=(seeds.random(),)) for _ in range(concurrency)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return (stats.ok + stats.cancelled) / seconds, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--calibrate", type=float, default=15)
    ap.add_argument("--load", type=float, default=0.6, help="fraction of the measured capacity to drive")
    # KV pages are touched the first time a block is used, so RssAnon grows until the prefix cache
    # has used every block once (a 2048-block cache took minutes): a small cache fills during the
    # warm-up, after which growth would be a leak.
    ap.add_argument("--kv-cache-memory", default="2MiB")
    ap.add_argument("--out", default="")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    port = free_port()
    server = subprocess.Popen([a.bin, "serve", "--model", a.model, "--port", str(port), "--threads", "2",
                               "--max-num-seqs", str(a.max_num_seqs), "--log-format", "none",
                               "--kv-cache-memory", a.kv_cache_memory],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(600):
            try:
                if get_json(port, "/health").get("status") == "ok":
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    conn.request("GET", "/ready")
                    if conn.getresponse().status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None:
                sys.exit(f"server exited: {server.stderr.read().decode()[-2000:]}")
            time.sleep(0.2)
        # Warm-up, not counted: the first seconds of a fresh server run slower (pages touched the
        # first time, the chunked-prefill budget still learning): 19.6 req/s cold vs 27.5 after.
        closed_loop(port, a.max_num_seqs, 5, a.seed + 2)
        capacity, probe_before = closed_loop(port, a.max_num_seqs, a.calibrate, a.seed)
        rate = a.load * capacity
        print(f"soak: capacity {capacity:.2f} req/s with {a.max_num_seqs} at a time; driving {rate:.2f} req/s "
              f"for {a.duration:.0f} s", flush=True)
        stats = Stats()
        samples = []
        t_start = time.monotonic()
        driver = threading.Thread(target=lambda: samples.append(("threads", drive(port, rate, a.duration, stats, rng))))
        driver.start()
        header = "t_s\trss_anon_kb\tthreads\tfds\tkv_total\tkv_referenced\tkv_cached\tp99_ms\tcompleted\tfailed"
        print(header, flush=True)
        rows = []
        last = t_start
        while driver.is_alive() or time.monotonic() - t_start < a.duration:
            time.sleep(max(0.0, last + 10 - time.monotonic()))
            now = time.monotonic()
            rss, threads, fds = proc_sample(server.pid)
            kv = get_json(port, "/stats").get("kv_blocks", {})
            with stats.lock:
                window = [ms for (t, ms) in stats.latencies if last <= t < now]
                ok, failed = stats.ok, len(stats.failed)
            row = (round(now - t_start), rss, threads, fds, kv.get("total"), kv.get("referenced"), kv.get("cached"),
                   round(percentile(window, 0.99), 1), ok, failed)
            rows.append(row)
            print("\t".join(str(x) for x in row), flush=True)
            last = now
            if now - t_start >= a.duration and not driver.is_alive():
                break
        driver.join()
        for t in samples[0][1] if samples else []:
            t.join(timeout=60)
        # Settled: nothing referenced once the load is gone. Connections close asynchronously (a
        # cancelled stream is noticed at the server's next write; an idle keep-alive connection
        # after the keep-alive timeout, 5 s), so the fd count is polled for up to 15 s: a leak
        # stays, a connection in its last milliseconds goes (CI of stop 22: 6 fds 2 s after, 4 before).
        time.sleep(2)
        kv = get_json(port, "/stats").get("kv_blocks", {})
        warm = max(45.0, 0.2 * a.duration)
        after = [r for r in rows if r[0] >= warm] or rows[-1:]
        # The idle baseline: the fewest fds sampled after warm-up (a sample may catch connections
        # in flight, so the first one is no baseline: 16 in one run, 4 in the next).
        fd_base = min(r[3] for r in after)
        settle_end = time.monotonic() + 15
        while True:
            rss, threads, fds = proc_sample(server.pid)
            if fds <= fd_base or time.monotonic() > settle_end:
                break
            time.sleep(0.5)
        fd_targets = sorted(fd_links(server.pid))
        capacity_after, probe_after = closed_loop(port, a.max_num_seqs, a.calibrate, a.seed + 1)
        before_ms = [ms for (_, ms) in probe_before.latencies]
        after_ms = [ms for (_, ms) in probe_after.latencies]
        p50_before, p50_after = percentile(before_ms, 0.5), percentile(after_ms, 0.5)
        p99_before, p99_after = percentile(before_ms, 0.99), percentile(after_ms, 0.99)
        if a.out:
            with open(a.out, "w") as f:
                f.write(header + "\n" + "\n".join("\t".join(str(x) for x in r) for r in rows) + "\n")
        first, lastrow = after[0], rows[-1]
        drift = (lastrow[1] - first[1]) / first[1]
        # Pooled thirds of the time after warm-up: every request that completed in each third.
        t_warm = t_start + after[0][0] - 10  # start of the first 10-s window after warm-up
        span = (t_start + rows[-1][0]) - t_warm
        with stats.lock:
            lat = list(stats.latencies)
        first_third = [ms for (t, ms) in lat if t_warm <= t < t_warm + span / 3]
        last_third = [ms for (t, ms) in lat if t_warm + 2 * span / 3 <= t]
        p50_first, p50_last = percentile(first_third, 0.5), percentile(last_third, 0.5)
        p_first, p_last = percentile(first_third, 0.99), percentile(last_third, 0.99)
        all_failed = stats.failed + probe_before.failed + probe_after.failed
        verdict = {
            "rss_anon_drift_pct": round(100 * drift, 2),
            "fds": [fd_base, lastrow[3], fds], "threads": [first[2], lastrow[2], threads],
            "probe_p50_ms": [round(p50_before, 1), round(p50_after, 1)],
            "probe_p99_ms": [round(p99_before, 1), round(p99_after, 1)],
            "probe_req_per_s": [round(capacity, 2), round(capacity_after, 2)],
            "open_loop_p50_ms_thirds": [round(p50_first, 1), round(p50_last, 1)],
            "open_loop_p99_ms_thirds": [round(p_first, 1), round(p_last, 1)],
            "requests_thirds": [len(first_third), len(last_third)],
            "completed": stats.ok, "cancelled": stats.cancelled, "failed": len(all_failed),
            "kv_after": kv,
        }
        problems = []
        if abs(drift) >= 0.05:
            problems.append(f"RssAnon drifted {100 * drift:.1f}% after warm-up")
        if fds > fd_base:
            problems.append(f"open fds grew {fd_base} -> {fds}: {fd_targets}")
        if threads > first[2]:
            problems.append(f"threads grew {first[2]} -> {threads}")
        if not (p50_after <= 1.5 * p50_before + 20):
            problems.append(f"closed-loop P50 rose {p50_before:.0f} -> {p50_after:.0f} ms")
        if not (p99_after <= 2 * p99_before + 50):
            problems.append(f"closed-loop P99 rose {p99_before:.0f} -> {p99_after:.0f} ms")
        if not (capacity_after * 1.5 >= capacity):
            problems.append(f"closed-loop throughput fell {capacity:.2f} -> {capacity_after:.2f} req/s")
        if all_failed:
            problems.append(f"{len(all_failed)} requests failed, e.g. {all_failed[:3]}")
        if kv.get("referenced") != 0:
            problems.append(f"KV blocks still referenced after the load: {kv}")
        if server.poll() is not None:
            problems.append(f"server exited with {server.returncode}")
        print("soak: " + json.dumps(verdict), flush=True)
        if problems:
            print("soak: FAIL: " + "; ".join(problems), flush=True)
            return 1
        print("soak: PASS", flush=True)
        return 0
    finally:
        stop_server(server)


if __name__ == "__main__":
    sys.exit(main())
