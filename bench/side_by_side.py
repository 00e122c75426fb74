#!/usr/bin/env python3
"""Side-by-side CPU speed: qwenserve `bench` against a peer's `llama-bench` on the same GGUF files.

The peer (e.g. ik_llama.cpp's or llama.cpp's `llama-bench`) is never built by this repository: pass
the path of a binary you built yourself with `--peer`. For each round and model the two engines run
back to back in alternating order (qwenserve first in odd rounds, the peer first in even ones), with
the same threads, prompt length (ppN: prefill tokens/s) and generated tokens (tgN: decode
tokens/s), weights read into RAM on both sides (qwenserve `--no-mmap`, the peer `-mmp 0` in the
default peer settings). A STREAM-like read probe (`qwenserve_microbench`'s ReadBandwidth with the
same threads) runs before the first round and after every round, so decode can be put against the
memory roofline measured in the same minutes.

Printed per model and test: the median tokens/s over the rounds of each engine (each round's value
is that engine's mean over its `-r` repetitions), the ratio qwenserve / peer, and for tg tests the
weight read rate (model bytes x tokens/s, GB/s) as a share of the read bandwidth: per round, the
engine's rate over the mean of the probes just before and after that round, median over the rounds
(a VM's bandwidth can swing 2x between minutes, so a probe from another minute misleads). The peer's
commit (llama-bench's `build_commit`) and the CPU's model and ISA flags are printed with the table.

Example (2 threads, 3 rounds, ik_llama.cpp at its fastest documented CPU settings; -p and -n take
comma lists, e.g. -p 512,2048):
  bench/side_by_side.py --peer ../peers/ik_llama.cpp/build/bin/llama-bench \
      --peer-args="-rtr 1 -fa 1 -mmp 0" -m q4_k_m.gguf -m q8_0.gguf -p 512,2048 -n 128 -t 2 --rounds 3

Errors: exits 2 with a message when a binary is missing or a run fails (its stderr tail is shown).
Only the Python standard library is used.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys


def fail(message):
    """Prints message to stderr and exits 2."""
    print(f"side_by_side: {message}", file=sys.stderr)
    sys.exit(2)


def run(cmd):
    """Runs cmd (list) and returns its stdout; exits 2 naming the command when it fails."""
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:  # not an executable, a directory, a binary for another machine
        fail(f"cannot run `{shlex.join(cmd)}`: {e}")
    if proc.returncode != 0:
        fail(f"`{shlex.join(cmd)}` exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return proc.stdout


def qwenserve_run(binary, model, args):
    """{test name: mean tokens/s} and the model's weight bytes from one `qwenserve bench --json`."""
    cmd = [binary, "bench", "-m", model, "-p", str(args.n_prompt), "-n", str(args.n_gen),
           "-t", str(args.threads), "-r", str(args.repetitions), "--no-mmap", "--json"]
    results, model_bytes = {}, 0
    for line in run(cmd).splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
            results[j["test"]] = float(j["tokens_per_second"])
            if not results[j["test"]] > 0:  # the read share and the ratio would be meaningless
                raise ValueError(f"{j['test']}: tokens_per_second {j['tokens_per_second']}")
            model_bytes = int(j["model_bytes"])
        except (ValueError, KeyError, TypeError) as e:
            fail(f"`{shlex.join(cmd)}` printed a line that is not a bench result ({e}): {line[:200]}")
    if not results:
        fail(f"`{shlex.join(cmd)}` printed no bench results")
    return results, model_bytes


def token_counts(text):
    """argparse type of -p / -n: a comma list of token counts >= 0 ("512" or "512,2048"), returned
    normalised ("512,2048"); both engines take such a list and run one test per value."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}")
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"token counts must be >= 0, got {text!r}")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:  # both engines would run the test twice and the table would show one row
        raise argparse.ArgumentTypeError(f"{', '.join(map(str, repeated))} listed more than once in {text!r}")
    return ",".join(str(v) for v in values)


def peer_run(binary, model, args):
    """{test name: avg tokens/s} and the build commit from one `llama-bench -o json` run."""
    cmd = [binary, "-m", model, "-p", str(args.n_prompt), "-n", str(args.n_gen), "-t", str(args.threads),
           "-r", str(args.repetitions), "-o", "json"] + shlex.split(args.peer_args)
    out = run(cmd)
    results, commit = {}, "?"
    try:
        for row in json.loads(out):
            n_prompt, n_gen = int(row.get("n_prompt", 0)), int(row.get("n_gen", 0))
            name = f"pp{n_prompt}" if n_gen == 0 else f"tg{n_gen}"
            results[name] = float(row["avg_ts"])
            if not results[name] > 0:  # the ratio divides by it
                raise ValueError(f"{name}: avg_ts {row['avg_ts']}")
            commit = row.get("build_commit", commit)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        fail(f"`{shlex.join(cmd)}` did not print llama-bench's JSON rows ({e}): {out[:200]!r}")
    if not results:
        fail(f"`{shlex.join(cmd)}` printed no results")
    return results, commit


def read_probe_gbps(microbench, threads):
    """Read bandwidth in GB/s with `threads` threads (qwenserve_microbench ReadBandwidth)."""
    out = run([microbench, f"--benchmark_filter=^ReadBandwidth/threads:{threads}(/real_time)?$",
               "--benchmark_format=json", "--benchmark_min_time=0.5"])
    try:
        gbps = max(float(b["GB_per_s"]) for b in json.loads(out)["benchmarks"])
    except (ValueError, KeyError, TypeError) as e:
        fail(f"`{microbench}` did not print a ReadBandwidth result ({e}): {out[:200]!r}")
    if not gbps > 0:  # also NaN; the read shares divide by it
        fail(f"`{microbench}` measured a read bandwidth of {gbps} GB/s")
    return gbps


def cpu_description():
    """CPU model name and the SIMD flags that matter for these kernels, from /proc/cpuinfo."""
    model, flags = "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    wanted = [f for f in sorted(flags) if f.startswith(("avx", "fma", "f16c"))]
    return model, " ".join(wanted)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    default_build = os.path.join(os.path.dirname(here), "build", "release")
    p.add_argument("--peer", required=True, help="path of the peer's llama-bench binary")
    p.add_argument("--peer-args", default="-rtr 1 -fa 1 -mmp 0",
                   help="extra llama-bench arguments (default: %(default)s, ik_llama.cpp's fastest CPU settings)")
    p.add_argument("--qwenserve", default=os.path.join(default_build, "qwenserve"))
    p.add_argument("--microbench", default=os.path.join(default_build, "bench", "qwenserve_microbench"),
                   help="qwenserve_microbench for the read probe ('' to skip it)")
    p.add_argument("-m", "--model", action="append", required=True, help="GGUF file (repeatable)")
    p.add_argument("-p", "--n-prompt", type=token_counts, default="512",
                   help="prompt lengths of the ppN tests, a comma list (default: %(default)s)")
    p.add_argument("-n", "--n-gen", type=token_counts, default="128",
                   help="generated tokens of the tgN tests, a comma list (default: %(default)s)")
    p.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    p.add_argument("-r", "--repetitions", type=int, default=1, help="timed runs per engine per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="also write every round's figures to this file")
    args = p.parse_args()
    for name, value in (("--threads", args.threads), ("--repetitions", args.repetitions), ("--rounds", args.rounds)):
        if value < 1:
            p.error(f"{name} must be >= 1, got {value}")
    try:
        shlex.split(args.peer_args)
    except ValueError as e:
        p.error(f"--peer-args: {e}")
    if args.json:
        json_dir = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(json_dir):
            p.error(f"--json: the folder {json_dir!r} does not exist")
    for binary in [args.peer, args.qwenserve] + ([args.microbench] if args.microbench else []):
        if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
            fail(f"{binary} is not an executable file")

    qs_rounds = {m: [] for m in args.model}
    peer_rounds = {m: [] for m in args.model}
    model_bytes, probes, commit = {}, [], "?"
    if args.microbench:
        probes.append(read_probe_gbps(args.microbench, args.threads))
    for rnd in range(1, args.rounds + 1):
        for model in args.model:
            order = ["qwenserve", "peer"] if rnd % 2 else ["peer", "qwenserve"]
            for who in order:
                if who == "qwenserve":
                    res, model_bytes[model] = qwenserve_run(args.qwenserve, model, args)
                    qs_rounds[model].append(res)
                else:
                    res, commit = peer_run(args.peer, model, args)
                    peer_rounds[model].append(res)
                print(f"round {rnd} {os.path.basename(model)} {who}: "
                      + ", ".join(f"{k} {v:.2f} t/s" for k, v in sorted(res.items())), file=sys.stderr)
        if args.microbench:
            probes.append(read_probe_gbps(args.microbench, args.threads))
            print(f"round {rnd} read probe {probes[-2]:.1f} GB/s before, {probes[-1]:.1f} after", file=sys.stderr)
    # Read bandwidth of round r: the mean of the probes just before and just after it.
    round_probe = [(probes[r] + probes[r + 1]) / 2 for r in range(args.rounds)] if probes else []

    def read_share(model, rounds, test):
        """Median over rounds of model bytes x the round's tokens/s / the round's read bandwidth."""
        return statistics.median(model_bytes[model] * rounds[r][test] / 1e9 / round_probe[r]
                                 for r in range(args.rounds))

    cpu_model, cpu_flags = cpu_description()
    probe = statistics.median(probes) if probes else None
    print(f"CPU: {cpu_model}; flags: {cpu_flags}")
    print(f"peer: {args.peer} (build_commit {commit}) args: {args.peer_args}")
    print(f"threads {args.threads}, {args.rounds} rounds interleaved, {args.repetitions} run(s) per engine per round"
          + (f", read probe median {probe:.1f} GB/s (min {min(probes):.1f}, max {max(probes):.1f}); tg read shares:"
             " per round, tokens/s x model bytes / mean of the probes before and after it, median over rounds"
             if probe else ""))
    print(f"{'model':<28} {'test':<7} {'qwenserve t/s':>14} {'peer t/s':>10} {'ratio':>7} {'qs read':>8} {'peer read':>9}")
    summary = []
    for model in args.model:
        tests = sorted({t for r in qs_rounds[model] for t in r} & {t for r in peer_rounds[model] for t in r},
                       key=lambda t: (t[:2], int(t[2:])))  # pp before tg, then by token count
        for test in tests:
            qs = statistics.median(r[test] for r in qs_rounds[model])
            peer = statistics.median(r[test] for r in peer_rounds[model])
            share_qs = share_peer = ""
            shares = {}
            if test.startswith("tg") and probe:
                shares = {"qwenserve_read_share": read_share(model, qs_rounds[model], test),
                          "peer_read_share": read_share(model, peer_rounds[model], test)}
                share_qs = f"{100 * shares['qwenserve_read_share']:.0f}%"
                share_peer = f"{100 * shares['peer_read_share']:.0f}%"
            print(f"{os.path.basename(model):<28} {test:<7} {qs:>14.2f} {peer:>10.2f} {qs / peer:>6.2f}x"
                  f" {share_qs:>8} {share_peer:>9}")
            summary.append({"model": model, "test": test, "qwenserve_tps": qs, "peer_tps": peer,
                            "ratio": qs / peer, **shares})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peer_commit": commit, "peer_args": args.peer_args, "cpu": cpu_model,
                       "flags": cpu_flags, "read_probe_gbps": probes, "round_read_gbps": round_probe,
                       "summary": summary,
                       "qwenserve_rounds": qs_rounds, "peer_rounds": peer_rounds}, f, indent=1)


if __name__ == "__main__":
    main()
