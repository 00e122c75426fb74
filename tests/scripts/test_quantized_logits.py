#!/usr/bin/python3
"""Model-level test of quantized weights: logits of every weight type vs the f32 logits of the same
weights, on random-weight models made by tools/qwenserve-make-test-model.

Route: make an f32 model -> `$QS_BIN quantize IN OUT --type T` -> `$QS_BIN logits` on both (f32 KV
cache, so the only difference is the weights and the activations' int8 quantization).

1. Normalized RMS error, nrmse = rms(logits_T - logits_f32) / rms(logits_f32), on a "tiny" (every
   row shorter than 256: K-quants fall back to Q4_0/Q8_0) and a "small" model (K-quants native).
   The bound is derived here from the formats, never from our output:
     eps_w(type) = RMS of the rounding error of N(0, 1) weights under the type's quantization step,
                   step / sqrt(12) per element (uniform rounding error), with the step each format
                   defines (GGUF / ggml block layouts):
                     Q8_0: max|x| / 127 per 32     Q4_0: max|x| / 8 per 32
                     Q4_K: (max - min(min, 0)) / 15 per 32, + half a 6-bit super-block scale step
                     Q5_K: same / 31                Q6_K: max|x| / 31 per 16, + half an 8-bit scale step
                     BF16: relative 2^-8 spacing    F16: 2^-10
                   simulated here on numpy samples;
     eps_a(type) = the same for the activations the integer dots quantize to int8 (d = max|a| / 127
                   per 32 for Q8_0/Q4_0, per 256 for K-quants; a = product of two N(0,1), the
                   heavy-tailed silu(gate) * up input of ffn_down); 0 for float weights;
     eps_op = sqrt(eps_w^2 + eps_a^2) of the worst matrix type present in the file (read from it);
     bound = 2 * sqrt(4 L + 1) * eps_op: L layers of two residual blocks, each a chain of two
     matmuls (q/k/v -> o, gate/up -> down) whose independent relative errors add in quadrature,
     plus the lm_head; the factor 2 covers amplification by the non-linear parts (softmax, SiLU,
     RMSNorm).
2. Top-1 agreement on a model with peaked outputs (--embed-std 0.5 with tied embeddings: the
   logits have a clear winner, unlike the near-flat distributions of random models), over every
   position of three prompts: >= 98% for q8_0, >= 90% for q4_k_m.
3. Routes that must give identical bytes/logits: an HF directory quantized to q8_0 gives exactly
   the logits of the same weights' GGUF quantized to q8_0, with the metadata (tokenizer, chat
   template, hyper-parameters) the test-model tool's Python GGUF writer produces; `logits --quantize q4_k_m` (in memory)
   gives exactly the logits of the q4_k_m file; quantizing twice gives identical files.

Env: QS_BIN, QS_SOURCE_DIR, QS_TOKENIZER_DIR, QS_WORK_DIR (as tests/scripts/test_reference_logits.py).
"""
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.environ.get("QS_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QS_BIN = os.environ.get("QS_BIN", "")
TOKENIZER = os.environ.get("QS_TOKENIZER_DIR") or os.path.join(SRC, ".cache", "tokenizer-qwen3")
MAKER = os.path.join(SRC, "tools", "qwenserve-make-test-model")
WORK = os.path.join(os.environ.get("QS_WORK_DIR") or tempfile.mkdtemp(prefix="qs-quant-"), "quantized_logits")

TYPES = ["q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "bf16"]
TOKENS = [9707, 11, 1879, 0, 151644, 872, 198, 100000, 65535, 42, 128000, 5000, 3, 151643, 77777,
          1, 151645, 20000, 314, 2701]
GGML_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 8: "Q8_0", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 30: "BF16"}
THREADS = "2"

failures = []


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def check(ok, message):
    print(("ok    " if ok else "FAIL  ") + message, flush=True)
    if not ok:
        failures.append(message)


def make_model(name, args):
    path = os.path.join(WORK, name)
    run([sys.executable, MAKER, "--tokenizer", TOKENIZER, "--out", path, *args])
    return path


def quantize(src, qtype, out=None):
    out = out or os.path.join(WORK, f"{os.path.basename(src).split('.')[0]}-{qtype}.gguf")
    run([QS_BIN, "quantize", src, out, "--type", qtype, "-t", THREADS, "-q"])
    return out


def logits(model, tokens, extra=()):
    out = os.path.join(WORK, "logits.bin")
    run([QS_BIN, "logits", "--model", model, "--tokens", ",".join(map(str, tokens)), "--out", out,
         "--kv-cache-type", "f32", "-t", THREADS, *extra])
    return np.fromfile(out, dtype="<f4").reshape(len(tokens), -1).astype(np.float64)


# ---- GGUF header: tensor types (independent minimal reader, GGUF spec v3) ----

def gguf_tensor_types(path):
    with open(path, "rb") as f:
        data = f.read(64 << 20)
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("<Q")
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    sizes = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        return take(sizes[t])

    assert data[:4] == b"GGUF"
    pos = 4
    take("<I")
    n_tensors, n_kv = take("<Q"), take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("<I"))
    types = {}
    for _ in range(n_tensors):
        name = string()
        ndim = take("<I")
        dims = [take("<Q") for _ in range(ndim)]
        types[name] = (GGML_NAMES[take("<I")], dims)
        take("<Q")
    return meta, types


# ---- error model from the formats ----

def _blocks(x, n):
    return x.reshape(-1, n)


def weight_step_rms(t, x):
    """RMS of step / sqrt(12) over the elements of x (N(0,1) samples) for format t."""
    if t == "F32":
        return 0.0
    if t in ("BF16", "F16"):
        mant = 8 if t == "BF16" else 11  # significand bits incl. the implicit one
        return float(np.sqrt(np.mean((np.abs(x) * 2.0 ** (1 - mant)) ** 2 / 12)))
    if t == "Q8_0":
        step = np.abs(_blocks(x, 32)).max(1) / 127
    elif t == "Q4_0":
        step = np.abs(_blocks(x, 32)).max(1) / 8
    elif t in ("Q4_K", "Q5_K"):
        b = _blocks(x, 32)
        levels = 15 if t == "Q4_K" else 31
        step = (b.max(1) - np.minimum(b.min(1), 0)) / levels
        sup = _blocks(step, 8)
        step = (sup + sup.max(1, keepdims=True) / 63 / 2).ravel()  # 6-bit sub-block scales
    elif t == "Q6_K":
        step = np.abs(_blocks(x, 16)).max(1) / 31
        sup = _blocks(step, 16)
        step = (sup + sup.max(1, keepdims=True) / 127 / 2).ravel()  # int8 sub-block scales
    else:
        raise ValueError(t)
    return float(np.sqrt(np.mean(step ** 2) / 12))


def activation_step_rms(t, a):
    block = {"Q8_0": 32, "Q4_0": 32, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256}.get(t)
    if block is None:
        return 0.0
    step = np.abs(_blocks(a, block)).max(1) / 127
    return float(np.sqrt(np.mean(step ** 2) / 12) / np.sqrt(np.mean(a ** 2)))


_RNG = np.random.default_rng(0)
_W = _RNG.standard_normal(1 << 18)
_A = _RNG.standard_normal(1 << 18) * _RNG.standard_normal(1 << 18)


def eps_op(t):
    return math.hypot(weight_step_rms(t, _W), activation_step_rms(t, _A))


def nrmse_bound(gguf_path):
    meta, types = gguf_tensor_types(gguf_path)
    arch = meta["general.architecture"]
    layers = meta[f"{arch}.block_count"]
    matrix_types = sorted({t for t, dims in types.values() if len(dims) == 2})
    eps = max(eps_op(t) for t in matrix_types)
    return 2 * math.sqrt(4 * layers + 1) * eps, matrix_types


def nrmse(a, ref):
    return float(np.sqrt(np.mean((a - ref) ** 2)) / np.sqrt(np.mean(ref ** 2)))


# ---- tests ----

def test_nrmse(name, f32_model):
    ref = logits(f32_model, TOKENS)
    for qtype in TYPES:
        q = quantize(f32_model, qtype)
        bound, matrix_types = nrmse_bound(q)
        err = nrmse(logits(q, TOKENS), ref)
        check(err < bound, f"{name} {qtype} ({'+'.join(matrix_types)}): nrmse {err:.2e} < bound {bound:.2e}")


def test_top1(peaked):
    rng = np.random.default_rng(5)
    prompts = [rng.integers(0, 151643, size=24).tolist() for _ in range(3)]
    refs = [logits(peaked, p).argmax(1) for p in prompts]
    for qtype, need in (("q8_0", 0.98), ("q4_k_m", 0.90)):
        q = quantize(peaked, qtype)
        same = sum(int((logits(q, p).argmax(1) == r).sum()) for p, r in zip(prompts, refs))
        total = sum(len(p) for p in prompts)
        check(same / total >= need, f"peaked {qtype}: top-1 agreement {same}/{total} >= {need:.0%}")


def test_identical_routes(tiny_gguf, tiny_hf, small_gguf):
    a = logits(quantize(tiny_gguf, "q8_0", os.path.join(WORK, "route-gguf-q8_0.gguf")), TOKENS)
    b = logits(quantize(tiny_hf, "q8_0", os.path.join(WORK, "route-hf-q8_0.gguf")), TOKENS)
    check(np.array_equal(a, b), "tiny: HF dir -> q8_0 gives the logits of GGUF -> q8_0")
    # Metadata of the HF route against the test-model tool's own GGUF writer (Python, following
    # llama.cpp's convert_hf_to_gguf.py): same keys and values except the name and file type.
    meta, _ = gguf_tensor_types(os.path.join(WORK, "route-hf-q8_0.gguf"))
    ref_meta, _ = gguf_tensor_types(tiny_gguf)
    ignore = {"general.name", "general.file_type"}
    differ = sorted(k for k in set(meta) | set(ref_meta)
                    if k not in ignore and meta.get(k) != ref_meta.get(k))
    check(not differ and meta.get("general.file_type") == 7,
          f"tiny: HF dir -> GGUF metadata equals the test-model GGUF's (differing: {differ[:5]})")
    q_file = quantize(small_gguf, "q4_k_m", os.path.join(WORK, "route-small-q4_k_m.gguf"))
    in_memory = logits(small_gguf, TOKENS, ("--quantize", "q4_k_m"))
    check(np.array_equal(in_memory, logits(q_file, TOKENS)), "small: --quantize q4_k_m == q4_k_m file")
    again = quantize(small_gguf, "q4_k_m", os.path.join(WORK, "route-small-q4_k_m-again.gguf"))
    with open(q_file, "rb") as f1, open(again, "rb") as f2:
        check(f1.read() == f2.read(), "small: quantizing twice gives identical files")


def main():
    if not QS_BIN:
        print("QS_BIN is not set", file=sys.stderr)
        return 2
    os.makedirs(WORK, exist_ok=True)
    tiny = ["--config", "tiny", "--init-std", "fan", "--dtype", "f32", "--seed", "21"]
    tiny_gguf = make_model("tiny-f32.gguf", tiny + ["--format", "gguf"])
    tiny_hf = make_model("tiny-f32-hf", tiny + ["--format", "hf"])
    small_gguf = make_model("small-f32.gguf", ["--config", "small", "--init-std", "fan", "--dtype", "f32",
                                               "--seed", "22", "--format", "gguf"])
    peaked = make_model("peaked-f32.gguf", ["--config", "small", "--init-std", "fan", "--embed-std", "0.5",
                                            "--dtype", "f32", "--seed", "23", "--format", "gguf"])
    test_nrmse("tiny", tiny_gguf)
    test_nrmse("small", small_gguf)
    test_top1(peaked)
    test_identical_routes(tiny_gguf, tiny_hf, small_gguf)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
