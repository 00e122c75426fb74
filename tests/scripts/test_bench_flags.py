#!/usr/bin/python3
"""`qwenserve bench` on bad and odd command lines (a new user's pass), on a tiny random model.

Refusals must exit with status 2 (bench's usage errors), print exactly one stderr line starting
"error: " and name the flag at fault (and the numbers the user needs to fix it). Checked:
  - a test that fits the model runs even with -c above the model's context (the -c warning names
    --ctx-size); a test longer than the model's context names the -n / -p flag that asked for it, the
    tokens it needs and the model's context, never a --ctx-size the user did not pass;
  - -c shorter than the longest test names both sizes; a test of N tokens fits -c N (no extra slot);
  - --decode-batch too large for the memory is refused up front naming --decode-batch and the limit
    (no minutes of prefill ending in std::bad_alloc); its --json line has step_ms (the "ms per decode
    step" of the text line), sequences and context; "1 sequence", "median of 1 run";
  - flags the chosen tests would ignore are refused: -p / -n / --spec-* with --decode-batch,
    --decode-context without it or above -c, --spec-ngram / --draft-max / --speculative-config /
    --spec-repeat-bias without --spec-repeat, --spec-ngram 0 with it, --tg-prompt without tg tests,
    --model-draft (bench has no draft model; not in --help);
  - --draft-max alone with --spec-repeat is used (ngram 3 x that many drafts);
  - -p '' and -p , are refused alike.

Env: QS_BIN, QS_SOURCE_DIR, QS_TOKENIZER_DIR, QS_WORK_DIR. Prints one line per check; exits 1 on
any failure.
"""
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

SRC = os.environ.get("QS_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QS_BIN = os.environ.get("QS_BIN") or os.path.join(SRC, "build", "release", "qwenserve")
TOKENIZER = os.environ.get("QS_TOKENIZER_DIR") or os.path.join(SRC, ".cache", "tokenizer-qwen3")
WORK = os.path.join(os.environ.get("QS_WORK_DIR") or tempfile.mkdtemp(prefix="qs-bench-flags-"), "bench_flags")
MODEL_CONTEXT = 40960  # max_position_embeddings of the "tiny" config

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def bench(model, args):
    p = subprocess.run([QS_BIN, "bench", "-m", model, "-t", "1", "-r", "1"] + args, capture_output=True, text=True,
                       timeout=300)
    return p.returncode, p.stdout, p.stderr


def refused(label, result, names, keywords=()):
    """Exit status 2, one 'error: ' line naming every string in `names` and `keywords`."""
    rc, _, err = result
    lines = err.splitlines()
    problems = []
    if rc != 2:
        problems.append(f"exit status {rc}, expected 2")
    if len(lines) != 1 or not lines[0].startswith("error: "):
        problems.append("stderr is not exactly one 'error: ' line")
    missing = [n for n in list(names) + list(keywords) if n not in err]
    if missing:
        problems.append("message lacks " + ", ".join(repr(m) for m in missing))
    check(not problems, f"{label}: refused naming {', '.join(names)}" +
          (f" ({'; '.join(problems)}; stderr={err[-400:]!r})" if problems else ""))


def ran(label, result):
    rc, out, err = result
    check(rc == 0, f"{label}: runs" + ("" if rc == 0 else f" (exit {rc}; stderr={err[-400:]!r})"))
    return rc == 0


def main():
    os.makedirs(WORK, exist_ok=True)
    model = os.path.join(WORK, "tiny.gguf")
    if not os.path.exists(model):
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "qwenserve-make-test-model"), "--config", "tiny",
                        "--format", "gguf", "--dtype", "f16", "--tokenizer", TOKENIZER, "--out", model + ".tmp"],
                       check=True, stdout=subprocess.DEVNULL)
        os.replace(model + ".tmp", model)

    cases = {
        # 1. context
        "ctx_above_model": ["-c", "50000", "-p", "8", "-n", "8"],
        "n_beyond_model": ["-p", "8", "-n", "2147483648"],
        "c_shorter": ["-p", "8", "-n", "8", "-c", "8"],
        "pp_fills_c": ["-p", "32", "-n", "0", "-c", "32"],
        "tg_fills_c": ["-p", "0", "-n", "8", "--tg-prompt", "4", "-c", "12"],
        # 2. --decode-batch
        "db_too_large": ["--decode-batch", "100000000", "--decode-context", "16"],
        "db_json": ["--decode-batch", "2", "--decode-context", "16", "--json"],
        "db_one": ["--decode-batch", "1", "--decode-context", "16"],
        "repeat_one_run": ["-p", "0", "-n", "0", "--spec-repeat", "4"],
        # 3. ignored combinations
        "db_c_short": ["--decode-batch", "2", "--decode-context", "64", "-c", "32"],
        "db_p": ["--decode-batch", "2", "-p", "64"],
        "db_n": ["--decode-batch", "2", "--n-gen", "4"],
        "db_spec_repeat": ["--decode-batch", "2", "--spec-repeat", "8"],
        "db_spec_ngram": ["--decode-batch", "2", "--spec-ngram", "3"],
        "dc_alone": ["--decode-context", "64", "-p", "8", "-n", "8"],
        "ngram0_repeat": ["--spec-repeat", "16", "--spec-ngram", "0", "-p", "0", "-n", "0"],
        "ngram_alone": ["--spec-ngram", "3", "-p", "8", "-n", "8"],
        "draft_max_alone": ["--draft-max", "3", "-p", "8", "-n", "8"],
        "spec_config_alone": ["--speculative-config", '{"method":"ngram"}', "-p", "8", "-n", "8"],
        "bias_alone": ["--spec-repeat-bias", "5", "-p", "8", "-n", "8"],
        "tg_prompt_unused": ["--tg-prompt", "4", "-p", "8", "-n", "0"],
        "model_draft": ["--model-draft", model, "-p", "8", "-n", "8"],
        "draft_max_repeat": ["--spec-repeat", "8", "--draft-max", "2", "-p", "0", "-n", "0"],
        "adaptive_alone": ["--spec-adaptive", "-p", "8", "-n", "8"],
        "no_adaptive_alone": ["--no-spec-adaptive", "-p", "8", "-n", "8"],
        "db_no_adaptive": ["--decode-batch", "2", "--no-spec-adaptive"],
        "fixed_repeat": ["--spec-repeat", "8", "--no-spec-adaptive", "-p", "0", "-n", "0", "--json"],
        # 4. empty lists
        "p_empty": ["-p", "", "-n", "8"],
        "p_comma": ["-p", ",", "-n", "8"],
    }
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(bench, model, args) for name, args in cases.items()}
        r = {name: f.result() for name, f in futures.items()}
    helptext = subprocess.run([QS_BIN, "bench", "--help"], capture_output=True, text=True).stdout

    # 1. A test that fits runs with -c above the model's context: a warning naming --ctx-size, no refusal.
    if ran("-c 50000 -p 8 -n 8 (model context 40960)", r["ctx_above_model"]):
        check("--ctx-size 50000" in r["ctx_above_model"][2] and "pp8" in r["ctx_above_model"][1],
              "-c 50000: the warning names --ctx-size 50000 and pp8 runs")
    refused("-n 2147483648", r["n_beyond_model"], ["-n 2147483648"], [str(MODEL_CONTEXT), "2147483656 tokens"])
    check("--ctx-size" not in r["n_beyond_model"][2], "-n 2147483648: no message about a --ctx-size not given")
    refused("-p 8 -n 8 -c 8", r["c_shorter"], ["--ctx-size 8", "-n 8"], ["16 tokens"])
    ran("-p 32 -c 32 (pp32 fills 32 slots)", r["pp_fills_c"])
    ran("-n 8 --tg-prompt 4 -c 12", r["tg_fills_c"])

    # 2. --decode-batch.
    refused("--decode-batch 100000000", r["db_too_large"], ["--decode-batch 100000000"], ["available", "at most"])
    if ran("--decode-batch 2 --json", r["db_json"]):
        j = json.loads(next(l for l in r["db_json"][1].splitlines() if l.startswith("{")))
        check(j.get("sequences") == 2 and j.get("context") == 16, f"--decode-batch --json: sequences, context: {j}")
        check("step_ms" in j and abs(j["step_ms"] - 1000.0 * 2 / j["tokens_per_second"]) < 1e-6 * j["step_ms"],
              "--decode-batch --json: step_ms = 1000 x N / tokens_per_second")
    if ran("--decode-batch 1", r["db_one"]):
        check(re.search(r"ms per decode step of 1 sequence at", r["db_one"][1]) is not None,
              "--decode-batch 1: '1 sequence'")
    if ran("--spec-repeat 4 -r 1", r["repeat_one_run"]):
        check(re.search(r"median of 1 run\n", r["repeat_one_run"][1]) is not None, "-r 1: 'median of 1 run'")

    # 3. Combinations that would be ignored.
    refused("--decode-context 64 -c 32", r["db_c_short"], ["--ctx-size 32", "--decode-context 64"])
    refused("--decode-batch -p", r["db_p"], ["-p/--n-prompt", "--decode-batch"])
    refused("--decode-batch --n-gen", r["db_n"], ["-n/--n-gen", "--decode-batch"])
    refused("--decode-batch --spec-repeat", r["db_spec_repeat"], ["--spec-repeat", "--decode-batch"])
    refused("--decode-batch --spec-ngram", r["db_spec_ngram"], ["--spec-ngram", "--decode-batch"])
    refused("--decode-context without --decode-batch", r["dc_alone"], ["--decode-context", "--decode-batch"])
    refused("--spec-repeat --spec-ngram 0", r["ngram0_repeat"], ["--spec-ngram 0", "--spec-repeat"])
    refused("--spec-ngram without --spec-repeat", r["ngram_alone"], ["--spec-ngram", "--spec-repeat"])
    refused("--draft-max without --spec-repeat", r["draft_max_alone"], ["--draft-max", "--spec-repeat"])
    refused("--speculative-config without --spec-repeat", r["spec_config_alone"], ["--speculative-config", "--spec-repeat"])
    refused("--spec-repeat-bias without --spec-repeat", r["bias_alone"], ["--spec-repeat-bias", "--spec-repeat"])
    refused("--tg-prompt with -n 0", r["tg_prompt_unused"], ["--tg-prompt"])
    refused("--model-draft", r["model_draft"], ["--model-draft"], ["no draft model"])
    if ran("--spec-repeat 8 --draft-max 2", r["draft_max_repeat"]):
        check("--spec-ngram 3 --draft-max 2" in r["draft_max_repeat"][1], "--spec-repeat uses --draft-max 2 (ngram 3)")
    refused("--spec-adaptive without --spec-repeat", r["adaptive_alone"], ["--spec-adaptive", "--spec-repeat"])
    # The message names both spellings (the user may have typed either) without CLI11's {false} marker.
    for label, key in (("--no-spec-adaptive without --spec-repeat", "no_adaptive_alone"),
                       ("--decode-batch --no-spec-adaptive", "db_no_adaptive")):
        refused(label, r[key], ["--spec-adaptive/--no-spec-adaptive"])
        check("{" not in r[key][2], f"{label}: no CLI11 default marker in {r[key][2]!r}")
    if ran("--spec-repeat 8 --draft-max 2", r["draft_max_repeat"]):
        check("--no-spec-adaptive" not in r["draft_max_repeat"][1], "--spec-repeat is adaptive by default")
    if ran("--spec-repeat 8 --no-spec-adaptive --json", r["fixed_repeat"]):
        j = json.loads(next(l for l in r["fixed_repeat"][1].splitlines() if l.startswith("{")))
        check(j.get("adaptive") is False, f"--no-spec-adaptive: adaptive false in the JSON line: {j}")
    check("--model-draft" not in helptext, "bench --help does not list --model-draft")
    check(re.search(r"--spec-ngram[^\n]*\n?[^\n]*--spec-repeat only", helptext) is not None,
          "bench --help: --spec-ngram is for --spec-repeat only")

    # 4. Empty lists.
    refused("-p ''", r["p_empty"], ["-p"], ["empty"])
    refused("-p ,", r["p_comma"], ["-p"], ["empty"])

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
