#!/usr/bin/python3
"""End-to-end logits test: the C++ engine (`$QS_BIN logits`) against the float64 numpy reference
(tests/reference/qwen_reference.py) on random-weight models made by tools/qwenserve-make-test-model.

For every model case: make the model, run
    $QS_BIN logits --model PATH --tokens 1,2,3,... --out FILE
which must write raw little-endian float32 logits [n_tokens, vocab] (row-major), and compare with
the reference's float64 logits of the same file:
    max |cpp - ref| / max |ref| < 1e-3
    argmax(cpp) == argmax(ref) at every position whose reference top-2 gap exceeds 1e-3.
Quantized models (f16, bf16) use the same bound: both sides dequantize the same stored values. Q8_0
weights are dotted with int8-quantized activations (as llama.cpp does), so that case gets the bound
derived below (REL_BOUND_INT8_ACT) and checks argmax only where the top-2 gap exceeds twice it.

Env: QS_BIN (the qwenserve binary), QS_SOURCE_DIR, QS_TOKENIZER_DIR, QS_WORK_DIR (scratch; models go
in QS_WORK_DIR/reference_logits). Optional: QS_LOGITS_CASES=comma-separated case names to run a
subset. Prints one line per case and ends with "N passed, M failed"; exits 1 on any failure.
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

SRC = os.environ.get("QS_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import qwen_reference as ref  # noqa: E402

QS_BIN = os.environ.get("QS_BIN", "")
TOKENIZER = os.environ.get("QS_TOKENIZER_DIR") or os.path.join(SRC, ".cache", "tokenizer-qwen3")
MAKER = os.path.join(SRC, "tools", "qwenserve-make-test-model")
WORK = os.path.join(os.environ.get("QS_WORK_DIR") or tempfile.mkdtemp(prefix="qs-logits-"), "reference_logits")

# 20 ids from across the vocabulary: ordinary BPE tokens, special/added tokens (151643..151668) and
# padding rows past the tokenizer (151669..151935), in no particular order.
TOKENS = [9707, 11, 1879, 0, 151644, 872, 198, 100000, 65535, 151935, 42, 128000,
          151667, 5000, 3, 151643, 77777, 1, 151645, 20000]

REL_BOUND = 1e-3
# With an F16 KV cache every cached K/V element carries a relative rounding error up to 2^-11
# (~4.9e-4, IEEE binary16); allow four such units through attention and two layers.
REL_BOUND_KV_F16 = 4 * 2.0 ** -11
GAP = 1e-3
# Q8_0 matmuls quantize each 32-element activation block to int8 (step max|x| / 127): every
# input moves by at most 1/254 of its block's max. A tiny model has 2 layers x 7 matmuls + lm_head;
# let each add that relative error once (linear accumulation, no cancellation assumed).
REL_BOUND_INT8_ACT = 15 / 254
INT8_ACT_CASES = {"tiny-gguf-q8_0"}

TINY = ["--config", "tiny", "--init-std", "fan"]
# name -> maker arguments (output path added)
CASES = [
    ("tiny-gguf-f32", TINY + ["--format", "gguf", "--dtype", "f32", "--seed", "1"]),
    ("tiny-hf-f32", TINY + ["--format", "hf", "--dtype", "f32", "--seed", "1"]),
    ("tiny-gguf-f16", TINY + ["--format", "gguf", "--dtype", "f16", "--seed", "2"]),
    ("tiny-gguf-bf16", TINY + ["--format", "gguf", "--dtype", "bf16", "--seed", "3"]),
    ("tiny-gguf-q8_0", TINY + ["--format", "gguf", "--dtype", "q8_0", "--seed", "4"]),
    ("tiny-hf-bf16", TINY + ["--format", "hf", "--dtype", "bf16", "--seed", "5"]),
    ("tiny-qwen2-untied-gguf-f32", TINY + ["--format", "gguf", "--dtype", "f32", "--seed", "6",
                                           "--arch", "qwen2", "--untied"]),
    ("tiny-qwen2-untied-hf-f32", TINY + ["--format", "hf", "--dtype", "f32", "--seed", "6",
                                         "--arch", "qwen2", "--untied"]),
    ("tiny-hf-sharded-f32", TINY + ["--format", "hf", "--dtype", "f32", "--seed", "7",
                                    "--shard-size-mb", "10"]),
    ("small-gguf-f32", ["--config", "small", "--format", "gguf", "--dtype", "f32", "--seed", "8"]),
    ("small-hf-f32", ["--config", "small", "--format", "hf", "--dtype", "f32", "--seed", "8"]),
]
# Cases re-run with the default F16 KV cache (all cases above use --kv-cache-type f32, i.e. pure
# f32 compute, which is what the 1e-3 bound is for). Name suffix "+kv-f16" on an existing case.
KV_F16_CASES = ["tiny-gguf-f32", "tiny-qwen2-untied-gguf-f32", "small-gguf-f32"]


def model_path(name, args):
    return os.path.join(WORK, name + (".gguf" if "gguf" in args else ""))


_reference_cache = {}


def run_case(name, args, kv_type):
    path = model_path(name, args)
    if path not in _reference_cache:
        r = subprocess.run([sys.executable, MAKER, "--tokenizer", TOKENIZER, "--out", path, *args],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return False, f"maker failed: {r.stderr.strip()[-2000:]}"
        _reference_cache[path] = ref.logits(ref.load_model(path), TOKENS)
    want = _reference_cache[path]
    bound = REL_BOUND if kv_type == "f32" else REL_BOUND_KV_F16
    gap = GAP
    if name in INT8_ACT_CASES:
        bound = REL_BOUND_INT8_ACT + (0 if kv_type == "f32" else REL_BOUND_KV_F16)
    n, vocab = want.shape
    out = os.path.join(WORK, f"{name}.kv-{kv_type}.logits.f32")
    if os.path.exists(out):
        os.remove(out)
    if not QS_BIN or not os.path.isfile(QS_BIN):
        return False, f"QS_BIN={QS_BIN!r} is not a file"
    cmd = [QS_BIN, "logits", "--model", path, "--tokens", ",".join(map(str, TOKENS)), "--out", out,
           "--kv-cache-type", kv_type]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return False, f"timed out: {' '.join(cmd)}"
    if r.returncode != 0:
        return False, f"exit {r.returncode}: {' '.join(cmd)}\n{(r.stdout + r.stderr).strip()[-2000:]}"
    if not os.path.isfile(out) or os.path.getsize(out) != n * vocab * 4:
        size = os.path.getsize(out) if os.path.isfile(out) else None
        return False, f"{out}: {size} bytes, expected {n * vocab * 4} ([{n}, {vocab}] float32)"
    got = np.fromfile(out, dtype="<f4").astype(np.float64).reshape(n, vocab)
    if not np.all(np.isfinite(got)):
        return False, "non-finite logits"
    rel = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    if name in INT8_ACT_CASES:  # a top-1 can only flip where the gap is within twice the error
        gap = max(GAP, 2 * bound * float(np.max(np.abs(want))))
    top2 = np.sort(want, axis=1)[:, -2:]
    checked = (top2[:, 1] - top2[:, 0]) > gap
    agree = got.argmax(axis=1) == want.argmax(axis=1)
    bad = [int(i) for i in np.nonzero(checked & ~agree)[0]]
    msg = (f"max rel err {rel:.2e} (bound {bound:.2e}), argmax agrees {int(agree.sum())}/{n} "
           f"({int(checked.sum())} positions with top-2 gap > {gap:.3g})")
    ok = rel < bound and not bad
    if bad:
        msg += f"; argmax differs at positions {bad}"
    return ok, msg


def main():
    if not os.path.isfile(os.path.join(TOKENIZER, "tokenizer.json")):
        print(f"tokenizer not found in {TOKENIZER} (run tools/fetch-tokenizer.sh)")
        print("0 passed, 1 failed")
        return 1
    os.makedirs(WORK, exist_ok=True)
    only = [s for s in os.environ.get("QS_LOGITS_CASES", "").split(",") if s]
    passed = failed = 0
    runs = [(name, args, "f32") for name, args in CASES]
    runs += [(name, args, "f16") for name, args in CASES if name in KV_F16_CASES]
    for name, args, kv_type in runs:
        if only and name not in only:
            continue
        label = name if kv_type == "f32" else name + "+kv-f16"
        t0 = time.monotonic()
        try:
            ok, msg = run_case(name, args, kv_type)
        except Exception as e:  # noqa: BLE001
            ok, msg = False, f"{type(e).__name__}: {e}"
        print(f"{'PASS' if ok else 'FAIL'} {label}: {msg} [{time.monotonic() - t0:.1f} s]", flush=True)
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
