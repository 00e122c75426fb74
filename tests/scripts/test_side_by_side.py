#!/usr/bin/python3
"""bench/side_by_side.py against a stand-in peer that speaks llama-bench's JSON output format.

The stand-in prints what `llama-bench -o json` prints (a JSON array, one object per test with
n_prompt, n_gen, avg_ts, build_commit; see llama-bench's json_printer) with fixed tokens/s, and logs
its arguments. Checked: the peer receives the same model, -p, -n, -t, -r as qwenserve plus the
default peer settings (-rtr 1 -fa 1 -mmp 0); the two engines alternate order per round
(qwenserve first in round 1, the peer first in round 2); the peer column is the stand-in's fixed
value, the ratio is qwenserve's median / that value, the tg read share is the median over rounds of
model_bytes * t/s / the mean of the probes before and after the round;
the peer's build_commit is printed; a missing peer binary, a peer that prints no llama-bench JSON
and bad argument values exit 2 with a message naming the problem.

Env: QS_BIN, QS_SOURCE_DIR, QS_TOKENIZER_DIR, QS_WORK_DIR.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

SRC = os.environ.get("QS_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QS_BIN = os.environ.get("QS_BIN") or os.path.join(SRC, "build", "release", "qwenserve")
TOKENIZER = os.environ.get("QS_TOKENIZER_DIR") or os.path.join(SRC, ".cache", "tokenizer-qwen3")
WORK = os.path.join(os.environ.get("QS_WORK_DIR") or tempfile.mkdtemp(prefix="qs-sbs-"), "side_by_side")
HARNESS = os.path.join(SRC, "bench", "side_by_side.py")

PEER = r'''#!/usr/bin/python3
import json, sys, time
args = sys.argv[1:]
with open(__file__ + ".log", "a") as f:
    f.write(json.dumps({"t": time.time(), "argv": args}) + "\n")
# llama-bench takes comma lists for -p and -n and prints one row per value (0: no such test).
ps = [int(v) for v in args[args.index("-p") + 1].split(",")]
ns = [int(v) for v in args[args.index("-n") + 1].split(",")]
print(json.dumps(
    [{"build_commit": "c0ffee1", "n_prompt": p, "n_gen": 0, "avg_ts": 100.0, "stddev_ts": 0.0} for p in ps if p > 0] +
    [{"build_commit": "c0ffee1", "n_prompt": 0, "n_gen": n, "avg_ts": 10.0, "stddev_ts": 0.0} for n in ns if n > 0]))
'''

MICROBENCH = r'''#!/usr/bin/python3
import json, sys
# Google Benchmark searches the filter as a regex in the benchmark's full name, which has a
# /real_time suffix (UseRealTime): it must select threads:1 and nothing else.
import re
flt = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark_filter="))
assert re.search(flt, "ReadBandwidth/threads:1/real_time"), flt
assert not re.search(flt, "ReadBandwidth/threads:16/real_time"), flt
assert not re.search(flt, "Gemv/Q8_0/threads:1/real_time"), flt
# A different bandwidth per call (20, 30, 10, ...), as a VM's swings: the harness must use the
# probes around each round.
count = __file__ + ".count"
calls = int(open(count).read()) if __import__("os").path.exists(count) else 0
open(count, "w").write(str(calls + 1))
print(json.dumps({"benchmarks": [{"name": "ReadBandwidth/threads:1/real_time",
                                  "GB_per_s": [20.0, 30.0, 10.0, 40.0][calls % 4]}]}))
'''

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def write_exe(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


def main():
    os.makedirs(WORK, exist_ok=True)
    model = os.path.join(WORK, "tiny.gguf")
    if not os.path.exists(model):
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "qwenserve-make-test-model"), "--config", "tiny",
                        "--format", "gguf", "--dtype", "f16", "--tokenizer", TOKENIZER, "--out", model],
                       check=True, stdout=subprocess.DEVNULL)
    peer = os.path.join(WORK, "llama-bench")
    micro = os.path.join(WORK, "microbench")
    write_exe(peer, PEER)
    write_exe(micro, MICROBENCH)
    for stale in (peer + ".log", micro + ".count"):
        if os.path.exists(stale):
            os.remove(stale)
    out_json = os.path.join(WORK, "result.json")
    cmd = [sys.executable, HARNESS, "--peer", peer, "--qwenserve", QS_BIN, "--microbench", micro, "-m", model,
           "-p", "16", "-n", "4", "-t", "1", "-r", "1", "--rounds", "2", "--json", out_json]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    check(proc.returncode == 0, f"harness exits 0 (stderr tail: {proc.stderr[-500:]!r})")
    if proc.returncode != 0:
        return
    print(proc.stdout)

    calls = [json.loads(line) for line in open(peer + ".log")]
    check(len(calls) == 2, "the peer runs once per round")
    for c in calls:
        a = c["argv"]
        for flag, value in (("-m", model), ("-p", "16"), ("-n", "4"), ("-t", "1"), ("-r", "1"),
                            ("-rtr", "1"), ("-fa", "1"), ("-mmp", "0"), ("-o", "json")):
            check(flag in a and a[a.index(flag) + 1] == value, f"peer gets {flag} {value}")

    # Order: round lines on stderr say who ran when.
    order = re.findall(r"round (\d) \S+ (qwenserve|peer)", proc.stderr)
    check(order == [("1", "qwenserve"), ("1", "peer"), ("2", "peer"), ("2", "qwenserve")],
          f"alternating order per round: {order}")

    check("build_commit c0ffee1" in proc.stdout, "peer commit printed")
    res = json.load(open(out_json))
    qs_pp = statistics.median(r["pp16"] for r in res["qwenserve_rounds"][model])
    qs_tg = statistics.median(r["tg4"] for r in res["qwenserve_rounds"][model])
    rows = {r["test"]: r for r in res["summary"]}
    check(rows["pp16"]["peer_tps"] == 100.0 and rows["tg4"]["peer_tps"] == 10.0, "peer medians = stand-in values")
    check(abs(rows["pp16"]["ratio"] - qs_pp / 100.0) < 1e-9, "pp ratio = qwenserve median / peer")
    check(abs(rows["tg4"]["ratio"] - qs_tg / 10.0) < 1e-9, "tg ratio = qwenserve median / peer")
    # Read share: per round the peer's 10 t/s x the model's weight bytes / the mean of the probes
    # around the round (20 and 30 GB/s, then 30 and 10), median of the two rounds.
    line = next(l for l in proc.stdout.splitlines() if " tg4 " in l)
    model_bytes = int(next(json.loads(l) for l in subprocess.run(
        [QS_BIN, "bench", "-m", model, "-p", "0", "-n", "1", "-r", "1", "-t", "1", "--json"],
        capture_output=True, text=True, check=True).stdout.splitlines() if l.startswith("{"))["model_bytes"])
    expect_share = statistics.median([model_bytes * 10.0 / 1e9 / 25.0, model_bytes * 10.0 / 1e9 / 20.0])
    check(line.split()[-1] == f"{100 * expect_share:.0f}%", f"peer read share in {line!r}")
    check(abs(rows["tg4"]["peer_read_share"] - expect_share) < 1e-12, "peer read share in the JSON summary")
    check(res["read_probe_gbps"] == [20.0, 30.0, 10.0], f"a probe before round 1 and after each: {res['read_probe_gbps']}")

    # Comma lists: both engines get the list and the table has one row per test.
    listed = subprocess.run([sys.executable, HARNESS, "--peer", peer, "--qwenserve", QS_BIN, "--microbench", "",
                             "-m", model, "-p", "8,16", "-n", "2", "-t", "1", "-r", "1", "--rounds", "1",
                             "--json", out_json], capture_output=True, text=True)
    check(listed.returncode == 0, f"-p 8,16: exit 0 (stderr tail: {listed.stderr[-300:]!r})")
    if listed.returncode == 0:
        check(sorted(r["test"] for r in json.load(open(out_json))["summary"]) == ["pp16", "pp8", "tg2"],
              "-p 8,16 -n 2: rows pp8, pp16 and tg2")
        last = json.loads(open(peer + ".log").read().splitlines()[-1])["argv"]
        check(last[last.index("-p") + 1] == "8,16", "the peer gets -p 8,16")
    wrong = subprocess.run([sys.executable, HARNESS, "--peer", peer, "-m", model, "-p", "8,x"],
                           capture_output=True, text=True)
    check(wrong.returncode == 2 and "comma list" in wrong.stderr, "-p 8,x: exit 2 naming the format")
    # A value listed twice would run twice on both engines and show as one row: refused.
    twice = subprocess.run([sys.executable, HARNESS, "--peer", peer, "-m", model, "-p", "32,8,32"],
                           capture_output=True, text=True)
    check(twice.returncode == 2 and "32 listed more than once" in twice.stderr, "-p 32,8,32: exit 2 naming 32")

    # A probe of 0 GB/s and a peer reporting 0 tokens/s would be divided by: exit 2 naming them.
    zero_micro = os.path.join(WORK, "microbench-zero")
    write_exe(zero_micro, MICROBENCH.replace("[20.0, 30.0, 10.0, 40.0][calls % 4]", "0.0"))
    zero_peer = os.path.join(WORK, "llama-bench-zero")
    write_exe(zero_peer, PEER.replace('"avg_ts": 100.0', '"avg_ts": 0.0'))
    for p_path, m_path, needle in ((peer, zero_micro, "read bandwidth of 0.0 GB/s"),
                                   (zero_peer, "", "avg_ts 0.0")):
        out = subprocess.run([sys.executable, HARNESS, "--peer", p_path, "--qwenserve", QS_BIN, "--microbench", m_path,
                              "-m", model, "-p", "8", "-n", "0", "-t", "1", "--rounds", "1"],
                             capture_output=True, text=True)
        check(out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr,
              f"{os.path.basename(p_path)} / {os.path.basename(m_path) or 'no probe'}: exit 2, {needle!r}"
              f" (stderr tail {out.stderr[-300:]!r})")

    bad = subprocess.run([sys.executable, HARNESS, "--peer", os.path.join(WORK, "nope"), "-m", model],
                         capture_output=True, text=True)
    check(bad.returncode == 2 and "nope is not an executable file" in bad.stderr, "missing peer: exit 2 naming it")

    # A peer that runs but prints no llama-bench JSON (here: a directory, then /bin/true) and bad
    # argument values end with exit 2 and a message, not a Python traceback.
    for peer_path, needle in ((WORK, "is not an executable file"), ("/bin/true", "did not print llama-bench's JSON")):
        out = subprocess.run([sys.executable, HARNESS, "--peer", peer_path, "-m", model, "-p", "8", "-n", "0",
                              "--rounds", "1", "--microbench="], capture_output=True, text=True)
        check(out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr,
              f"peer {peer_path}: exit 2, {needle!r}")
    for extra, needle in ((["-t", "0"], "--threads must be >= 1"), (["--rounds", "0"], "--rounds must be >= 1"),
                          (["--peer-args=\"x"], "--peer-args"), (["--json", "/nonexistent/dir/x.json"], "does not exist")):
        out = subprocess.run([sys.executable, HARNESS, "--peer", peer, "-m", model] + extra,
                             capture_output=True, text=True)
        check(out.returncode == 2 and needle in out.stderr, f"{' '.join(extra)}: exit 2 naming it")


if __name__ == "__main__":
    main()
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")
