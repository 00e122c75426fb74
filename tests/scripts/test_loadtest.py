#!/usr/bin/python3
"""`qwenserve loadtest` against `qwenserve serve` on a tiny random-weight model.

Every reported number is recomputed here from the raw per-request records that loadtest writes
with --dump-requests, by an independent route (numpy): for each level, ttft_ms / e2e_ms / tpot_ms /
itl_ms {mean, p50, p90, p95, p99, max} must equal numpy.mean / numpy.percentile (default "linear"
method) / max of the records (TPOT recomputed as (e2e - ttft) / (output_tokens - 1), ITL pooled
over requests), output_throughput = sum(output_tokens) / duration_s, and duration_s must cover
every request's [start, start + e2e]. The server's own usage numbers are used as a second
witness: each request streams output_tokens == max_tokens unless it finished with "stop", the
content chunk count matches the ITL list, completions prompts have the token count asked for
(sized with the server's /tokenize), and in a multi-turn run turn 2's prompt contains turn 1's
prompt and reply (prompt_tokens grows by at least the first reply's tokens).
The server runs with --no-output-guard, so a "length" finish means max_tokens was reached.
Runs: closed loop --concurrency 1,3 (chat), open loop --request-rate (completions), --multi-turn 2,
a --dataset of conversations, the human table (prompts sized with --tokenizer), and a refused connection counted under
errors["connect"].

Env: QS_BIN, QS_SOURCE_DIR, QS_TOKENIZER_DIR, QS_WORK_DIR (scratch: QS_WORK_DIR/loadtest).
"""
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

SRC = os.environ.get("QS_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QS_BIN = os.environ.get("QS_BIN") or os.path.join(SRC, "build", "release", "qwenserve")
TOKENIZER = os.environ.get("QS_TOKENIZER_DIR") or os.path.join(SRC, ".cache", "tokenizer-qwen3")
MAKER = os.path.join(SRC, "tools", "qwenserve-make-test-model")
WORK = os.path.join(os.environ.get("QS_WORK_DIR") or tempfile.mkdtemp(prefix="qs-loadtest-"), "loadtest")
STATS = ("mean", "p50", "p90", "p95", "p99", "max")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model():
    os.makedirs(WORK, exist_ok=True)
    out = os.path.join(WORK, "tiny.gguf")  # made afresh each run (2 s): never a stale model
    subprocess.run([sys.executable, MAKER, "--config", "tiny", "--format", "gguf", "--dtype", "f32",
                    "--init-std", "fan", "--tokenizer", TOKENIZER, "--seed", "1", "--out", out],
                   check=True, timeout=300)
    return out


def start_server(model):
    port = free_port()
    log = open(os.path.join(WORK, "server.log"), "w")
    proc = subprocess.Popen([QS_BIN, "serve", "--model", model, "--port", str(port), "--threads", "2",
                             "--log-format", "none", "--no-output-guard"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}; see {log.name}")
        try:
            with urllib.request.urlopen(url + "/ready", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server not ready after 60 s")


def loadtest(url, *args, dump=None, timeout=120, expect_rc=0):
    cmd = [QS_BIN, "loadtest", "--url", url, "--seed", "3", *args]
    if dump:
        cmd += ["--dump-requests", dump]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    print(f"  {' '.join(cmd[1:])}  ({time.time() - t0:.1f} s, rc {p.returncode})", flush=True)
    check(p.returncode == expect_rc, f"loadtest {args} exited {p.returncode}: {p.stderr[-2000:]}")
    return p


def json_levels(p):
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def read_dump(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def summary(values):
    if not values:
        return {k: None for k in STATS}
    x = np.asarray(values, dtype=np.float64)
    out = {"mean": float(np.mean(x)), "max": float(np.max(x))}
    for q in (50, 90, 95, 99):
        out[f"p{q}"] = float(np.percentile(x, q))
    return out


def check_summary(name, got, want):
    for k in STATS:
        check(close(got.get(k), want[k]), f"{name}.{k}: reported {got.get(k)} numpy {want[k]}")


def check_level(name, level, records, num_requests, slo_ttft_ms=None, slo_itl_ms=None):
    """Reported metrics of one level against numpy over its dumped records."""
    ok = [r for r in records if r["status"] == "200" and not r["error"]]
    check(len(records) == num_requests, f"{name}: {len(records)} dumped records, expected {num_requests}")
    check(level["completed"] == num_requests == len(ok), f"{name}: completed {level['completed']}, "
          f"ok records {len(ok)}, expected {num_requests}; errors {level['errors']}")
    check(level["errors"] == {}, f"{name}: errors {level['errors']}")
    ttft = [r["ttft_ms"] for r in ok if r["ttft_ms"] is not None]
    e2e = [r["e2e_ms"] for r in ok]
    tpot = [(r["e2e_ms"] - r["ttft_ms"]) / (r["output_tokens"] - 1)
            for r in ok if r["ttft_ms"] is not None and r["output_tokens"] > 1]
    itl = [g for r in ok for g in r["itl_ms"]]
    check_summary(f"{name} ttft_ms", level["ttft_ms"], summary(ttft))
    check_summary(f"{name} e2e_ms", level["e2e_ms"], summary(e2e))
    check_summary(f"{name} tpot_ms", level["tpot_ms"], summary(tpot))
    check_summary(f"{name} itl_ms", level["itl_ms"], summary(itl))
    duration = level["duration_s"]
    last_end = max(r["start_s"] + r["e2e_ms"] / 1000 for r in records if r["e2e_ms"] is not None)
    check(last_end <= duration + 1e-6, f"{name}: duration_s {duration} < last request end {last_end}")
    check(close(level["output_throughput"], sum(r["output_tokens"] for r in ok) / duration),
          f"{name}: output_throughput {level['output_throughput']}")
    check(close(level["request_throughput"], len(ok) / duration), f"{name}: request_throughput")
    good = [r for r in ok
            if (slo_ttft_ms is None or (r["ttft_ms"] is not None and r["ttft_ms"] <= slo_ttft_ms))
            and (slo_itl_ms is None or all(g <= slo_itl_ms for g in r["itl_ms"]))]
    check(close(level["goodput"], len(good) / duration),
          f"{name}: goodput {level['goodput']} != {len(good)} good requests / {duration} s")
    for r in ok:
        where = f"{name} conv {r['conversation']} turn {r['turn']}"
        if r["finish_reason"] != "stop":
            check(r["output_tokens"] == r["max_tokens"],
                  f"{where}: {r['output_tokens']} output tokens, max_tokens {r['max_tokens']} ({r['finish_reason']})")
        check(r["output_tokens"] <= r["max_tokens"], f"{where}: more tokens than max_tokens")
        check(len(r["itl_ms"]) == max(r["content_chunks"] - 1, 0), f"{where}: itl count vs content chunks")
        check(all(g >= 0 for g in r["itl_ms"]), f"{where}: negative ITL")
        check(r["ttft_ms"] is None or r["ttft_ms"] <= r["e2e_ms"], f"{where}: ttft > e2e")


def main():
    if not os.path.exists(os.path.join(TOKENIZER, "tokenizer.json")):
        print(f"no tokenizer.json in {TOKENIZER}: run tools/fetch-tokenizer.sh or set QS_TOKENIZER_DIR")
        return 1
    model = make_model()
    proc, url = start_server(model)
    try:
        print("closed loop, chat, --concurrency 1,3", flush=True)
        dump = os.path.join(WORK, "closed.jsonl")
        p = loadtest(url, "--concurrency", "1,3", "--num-requests", "12", "--input-tokens", "16:48",
                     "--output-tokens", "8:24", "--json", dump=dump)
        levels, records = json_levels(p), read_dump(dump)
        check([lv.get("concurrency") for lv in levels] == [1, 3], f"levels {[lv.get('concurrency') for lv in levels]}")
        for lv in levels:
            check_level(f"concurrency {lv['concurrency']}", lv,
                        [r for r in records if r.get("concurrency") == lv["concurrency"]], 12)
        print(json.dumps(levels[-1]), flush=True)

        print("open loop, completions, --request-rate 20", flush=True)
        dump = os.path.join(WORK, "open.jsonl")
        p = loadtest(url, "--endpoint", "completions", "--request-rate", "20", "--burstiness", "0.5",
                     "--num-requests", "10", "--input-tokens", "32", "--output-tokens", "8", "--json",
                     dump=dump)
        levels, records = json_levels(p), read_dump(dump)
        check(len(levels) == 1 and levels[0].get("request_rate") == 20, f"open-loop levels {levels}")
        if levels:
            check_level("rate 20", levels[0], records, 10)
        for r in records:  # the server's prompt count of a completions prompt sized with /tokenize
            check(r["prompt_tokens"] == 32, f"rate 20 conv {r['conversation']}: prompt_tokens {r['prompt_tokens']} != 32")

        print("multi-turn 2, chat, --concurrency 2", flush=True)
        dump = os.path.join(WORK, "multi.jsonl")
        p = loadtest(url, "--concurrency", "2", "--multi-turn", "2", "--num-requests", "8",
                     "--input-tokens", "24", "--output-tokens", "6", "--json",
                     "--slo-ttft-ms", "40", "--slo-itl-ms", "16", dump=dump)
        levels, records = json_levels(p), read_dump(dump)
        if levels:
            lv = levels[0]
            check_level("multi-turn", lv, records, 8, slo_ttft_ms=40, slo_itl_ms=16)
            by_turn = lv.get("ttft_ms_by_turn", {})
            check(sorted(by_turn) == ["1", "2"], f"ttft_ms_by_turn keys {sorted(by_turn)}")
            for turn in ("1", "2"):
                check_summary(f"multi-turn ttft turn {turn}", by_turn.get(turn, {}),
                              summary([r["ttft_ms"] for r in records if r["turn"] == int(turn)]))
            convs = {}
            for r in records:
                convs.setdefault(r["conversation"], {})[r["turn"]] = r
            check(len(convs) == 4, f"multi-turn: {len(convs)} conversations, expected 4")
            for c, turns in convs.items():
                t1, t2 = turns.get(1), turns.get(2)
                check(t1 is not None and t2 is not None, f"conversation {c}: turns {sorted(turns)}")
                if t1 and t2:
                    check(t2["prompt_tokens"] >= t1["prompt_tokens"] + t1["output_tokens"],
                          f"conversation {c}: turn 2 prompt {t2['prompt_tokens']} lacks the history "
                          f"({t1['prompt_tokens']} + {t1['output_tokens']})")
                    check(t2["start_s"] >= t1["start_s"] + t1["e2e_ms"] / 1000 - 1e-6,
                          f"conversation {c}: turn 2 started before turn 1 ended")

        print("dataset, --multi-turn 2", flush=True)
        dataset = os.path.join(WORK, "conversations.jsonl")
        with open(dataset, "w") as f:
            for i in range(2):
                f.write(json.dumps({"messages": [
                    {"role": "system", "content": "You are terse."},
                    {"role": "user", "content": f"Question {i}: name a colour."},
                    {"role": "assistant", "content": "Blue."},
                    {"role": "user", "content": "And another one, please, with a reason."}]}) + "\n")
        dump = os.path.join(WORK, "dataset.jsonl")
        p = loadtest(url, "--dataset", dataset, "--multi-turn", "2", "--num-requests", "6",
                     "--output-tokens", "5", "--concurrency", "2", "--json", dump=dump)
        levels, records = json_levels(p), read_dump(dump)
        if levels:
            check_level("dataset", levels[0], records, 6)
        by_conv = {}
        for r in records:
            by_conv.setdefault(r["conversation"], {})[r["turn"]] = r
        check(len(by_conv) == 3, f"dataset: {len(by_conv)} conversations, expected 3 (2 lines reused)")
        for c, turns in by_conv.items():
            if 1 in turns and 2 in turns:
                check(turns[2]["prompt_tokens"] > turns[1]["prompt_tokens"] + turns[1]["output_tokens"],
                      f"dataset conversation {c}: turn 2 prompt lacks turn 1 and its reply")

        print("human table, completions, prompts sized with --tokenizer", flush=True)
        dump = os.path.join(WORK, "table.jsonl")
        p = loadtest(url, "--concurrency", "2", "--num-requests", "4", "--input-tokens", "8",
                     "--output-tokens", "4", "--slo-ttft-ms", "10000", "--slo-itl-ms", "10000",
                     "--endpoint", "completions", "--tokenizer", TOKENIZER, dump=dump)
        check("ttft_ms" in p.stdout and "concurrency 2" in p.stdout, f"table output: {p.stdout}")
        check("--tokenizer" in p.stderr, f"table run did not size prompts with --tokenizer: {p.stderr}")
        for r in read_dump(dump):
            check(r["prompt_tokens"] == 8, f"--tokenizer conv {r['conversation']}: prompt_tokens {r['prompt_tokens']} != 8")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()

    print("refused connection", flush=True)
    dead = f"http://127.0.0.1:{free_port()}"
    p = loadtest(dead, "--concurrency", "2", "--num-requests", "3", "--input-tokens", "8",
                 "--output-tokens", "4", "--json", "--no-tokenize", expect_rc=1)
    levels = json_levels(p)
    check(levels and levels[0]["completed"] == 0 and levels[0]["errors"] == {"connect": 3},
          f"refused: {levels}")
    # Nothing measured: exit status 1 and one error line naming the URL.
    check(f"error: no request to {dead} completed: could not connect" in p.stderr,
          f"refused stderr: {p.stderr[-500:]}")

    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failures", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
