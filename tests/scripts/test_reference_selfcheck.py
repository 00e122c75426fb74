#!/usr/bin/python3
"""Self-checks of the float64 reference (tests/reference/qwen_reference.py) and of the test-model
maker (tools/qwenserve-make-test-model), independent of the C++ engine.

Building blocks are checked against direct formulas (rmsnorm by hand, RoPE as a complex rotation
and for relative-position invariance, attention as explicit loops, f16/bf16/q8_0 decoding on
hand-made bit patterns); the maker is checked for format independence (the GGUF and HF files of one
seed give the same logits; sharded == unsharded), determinism, rounding of f16/bf16/q8_0, and the
GGUF metadata the C++ side relies on.

Env: QS_SOURCE_DIR (repo root, default: two levels up), QS_TOKENIZER_DIR (default
.cache/tokenizer-qwen3), QS_WORK_DIR (scratch, default a temporary directory).
Prints one line per check and ends with "N passed, M failed"; exits 1 on any failure.
"""
import cmath
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback

import numpy as np

SRC = os.environ.get("QS_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import qwen_reference as ref  # noqa: E402

TOKENIZER = os.environ.get("QS_TOKENIZER_DIR") or os.path.join(SRC, ".cache", "tokenizer-qwen3")
MAKER = os.path.join(SRC, "tools", "qwenserve-make-test-model")
WORK = os.path.join(os.environ.get("QS_WORK_DIR") or tempfile.mkdtemp(prefix="qs-selfcheck-"), "reference_selfcheck")
TOKENS = [0, 151643, 9707, 11, 1879, 0, 151935, 100000, 42, 151667, 77777]

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def make(name, *args):
    """Runs the maker with args; returns the output path (cached within this run)."""
    out = os.path.join(WORK, name)
    if not os.path.exists(out):
        cmd = [sys.executable, MAKER, "--tokenizer", TOKENIZER, "--out", out, *args]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"maker failed: {' '.join(cmd)}\n{r.stderr}")
    return out


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


# ---------------------------------------------------------------------------- building blocks

@check
def rmsnorm_matches_hand_formula():
    rng = np.random.default_rng(1)
    x, w, eps = rng.standard_normal((3, 4, 7)), rng.standard_normal(7), 1e-5
    got = ref.rmsnorm(x, w, eps)
    for idx in np.ndindex(3, 4):
        row = x[idx]
        ms = sum(v * v for v in row) / len(row)
        for j in range(7):
            want = row[j] / math.sqrt(ms + eps) * w[j]
            assert abs(got[idx][j] - want) < 1e-12, (idx, j)


@check
def rope_matches_complex_rotation():
    rng = np.random.default_rng(2)
    n, heads, d, theta = 6, 3, 16, 1e6
    x = rng.standard_normal((n, heads, d))
    pos = np.array([0, 1, 2, 7, 100, 40000])
    got = ref.rope(x, pos, theta)
    half = d // 2
    for t in range(n):
        for h in range(heads):
            for i in range(half):
                angle = pos[t] * math.pow(theta, -2.0 * i / d)
                z = complex(x[t, h, i], x[t, h, i + half]) * cmath.exp(1j * angle)
                assert abs(got[t, h, i] - z.real) < 1e-9 and abs(got[t, h, i + half] - z.imag) < 1e-9
    assert np.array_equal(got[0], x[0]), "position 0 must be the identity"


@check
def rope_scores_depend_only_on_relative_position():
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((1, 1, 32)), rng.standard_normal((1, 1, 32))
    def score(pq, pk):
        return float(np.sum(ref.rope(q, np.array([pq]), 1e6) * ref.rope(k, np.array([pk]), 1e6)))
    assert abs(score(5, 2) - score(105, 102)) < 1e-9
    assert abs(score(5, 2) - score(2, 5)) > 1e-6  # and it does depend on it


@check
def attention_matches_naive_loops():
    rng = np.random.default_rng(4)
    n, H, KV, d = 5, 6, 2, 8
    q, k, v = rng.standard_normal((n, H, d)), rng.standard_normal((n, KV, d)), rng.standard_normal((n, KV, d))
    got = ref.causal_attention(q, k, v)
    for i in range(n):
        for h in range(H):
            kh = h // (H // KV)
            s = [sum(q[i, h, c] * k[j, kh, c] for c in range(d)) / math.sqrt(d) for j in range(i + 1)]
            m = max(s)
            e = [math.exp(z - m) for z in s]
            tot = sum(e)
            for c in range(d):
                want = sum(e[j] / tot * v[j, kh, c] for j in range(i + 1))
                assert abs(got[i, h, c] - want) < 1e-12, (i, h, c)


@check
def decoders_match_hand_made_bit_patterns():
    def dec(words, dtype, n):
        return ref.decode(np.array(words, dtype="<u2").view(np.uint8), dtype, n)
    f16 = dec([0x3C00, 0xC000, 0x7BFF, 0x0001, 0x3555, 0x8000], "F16", 6)
    assert list(f16[:5]) == [1.0, -2.0, 65504.0, 2.0 ** -24, 0.333251953125] and f16[5] == 0.0
    bf16 = dec([0x3F80, 0x4049, 0xC2F7, 0x0001], "BF16", 4)
    assert list(bf16) == [1.0, 3.140625, -123.5, 2.0 ** -133]
    # Q8_0: two blocks; d = 0.5 (f16 0x3800) and -0.25 (0xB400)
    q1, q2 = np.arange(-16, 16, dtype=np.int8), np.full(32, 127, dtype=np.int8)
    raw = (np.array([0x3800], "<u2").tobytes() + q1.tobytes() + np.array([0xB400], "<u2").tobytes() + q2.tobytes())
    got = ref.decode(np.frombuffer(raw, dtype=np.uint8).copy(), "Q8_0", 64)
    assert np.array_equal(got[:32], 0.5 * q1) and np.all(got[32:] == -31.75)


# ---------------------------------------------------------------------------- maker + readers

@check
def gguf_and_hf_of_one_seed_give_the_same_logits():
    for arch_args, tag in (([], "q3"), (["--arch", "qwen2", "--untied"], "q2u")):
        g = ref.load_model(make(f"tiny-{tag}.gguf", "--config", "tiny", "--format", "gguf", "--seed", "7",
                                "--init-std", "fan", *arch_args))
        h = ref.load_model(make(f"tiny-{tag}-hf", "--config", "tiny", "--format", "hf", "--seed", "7",
                                "--init-std", "fan", *arch_args))
        for name, t in h.tensors.items():
            assert np.array_equal(t.full(), g.tensors[name].full()), f"{tag}: {name} differs"
        assert set(h.tensors) == set(g.tensors), tag
        lg, lh = ref.logits(g, TOKENS), ref.logits(h, TOKENS)
        # the only difference: GGUF stores eps as float32
        assert rel_err(lg, lh) < 1e-9, (tag, rel_err(lg, lh))
        assert lg.std() > 0.3, f"{tag}: logits barely vary ({lg.std()})"


@check
def sharded_hf_equals_single_file():
    single = make("tiny-q3-hf", "--config", "tiny", "--format", "hf", "--seed", "7", "--init-std", "fan")
    sharded = make("tiny-q3-hf-sharded", "--config", "tiny", "--format", "hf", "--seed", "7", "--init-std", "fan",
                   "--shard-size-mb", "10")
    files = sorted(os.listdir(sharded))
    shards = [f for f in files if f.endswith(".safetensors")]
    assert shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"], files
    assert "model.safetensors.index.json" in files and "model.safetensors" not in files
    with open(os.path.join(sharded, "model.safetensors.index.json")) as f:
        idx = json.load(f)
    single_file = os.path.join(single, "model.safetensors")
    assert idx["metadata"]["total_size"] == os.path.getsize(single_file) - _st_header_bytes(single_file)
    assert set(idx["weight_map"].values()) == set(shards)
    a, b = ref.load_model(single), ref.load_model(sharded)
    assert np.array_equal(ref.logits(a, TOKENS[:5]), ref.logits(b, TOKENS[:5]))


def _st_header_bytes(path):
    with open(path, "rb") as f:
        return 8 + int.from_bytes(f.read(8), "little")


@check
def logits_are_causal():
    m = ref.load_model(make("tiny-q3.gguf", "--config", "tiny", "--format", "gguf", "--seed", "7", "--init-std", "fan"))
    full = ref.logits(m, TOKENS)
    part = ref.logits(m, TOKENS[:4])
    assert np.allclose(full[:4], part, rtol=0, atol=1e-12)
    other = ref.logits(m, TOKENS[:3] + [5])
    assert np.allclose(full[:3], other[:3], rtol=0, atol=1e-12) and not np.allclose(full[3], other[3])


@check
def maker_is_deterministic_and_seed_dependent():
    a = make("det-a.gguf", "--config", "tiny", "--format", "gguf", "--seed", "11")
    b = make("det-b.gguf", "--config", "tiny", "--format", "gguf", "--seed", "11")
    c = make("det-c.gguf", "--config", "tiny", "--format", "gguf", "--seed", "12")
    with open(a, "rb") as fa, open(b, "rb") as fb, open(c, "rb") as fc:
        da, db, dc = fa.read(), fb.read(), fc.read()
    assert da == db and da != dc and len(da) == len(dc)
    g = ref.load_model(a)
    emb = g.tensors["model.embed_tokens.weight"].rows(0, 1000)
    assert abs(emb.std() - 0.02) < 0.001 and abs(emb.mean()) < 0.001, (emb.std(), emb.mean())
    nw = g.vector("model.layers.0.input_layernorm.weight")
    assert np.all(np.abs(nw - 1) <= 0.1) and nw.std() > 0.01


@check
def f16_bf16_q8_0_are_rounded_from_the_f32_weights():
    base = ref.load_model(make("tiny-q3.gguf", "--config", "tiny", "--format", "gguf", "--seed", "7", "--init-std", "fan"))
    f16 = ref.load_model(make("tiny-q3-f16.gguf", "--config", "tiny", "--format", "gguf", "--dtype", "f16",
                              "--seed", "7", "--init-std", "fan"))
    bf16 = ref.load_model(make("tiny-q3-bf16-hf", "--config", "tiny", "--format", "hf", "--dtype", "bf16",
                               "--seed", "7", "--init-std", "fan"))
    q8 = ref.load_model(make("tiny-q3-q8_0.gguf", "--config", "tiny", "--format", "gguf", "--dtype", "q8_0",
                             "--seed", "7", "--init-std", "fan"))
    for name in ("model.layers.1.mlp.down_proj.weight", "model.layers.0.self_attn.q_norm.weight"):
        x = base.tensors[name].full()
        x32 = x.astype(np.float32)
        assert np.array_equal(x32.astype(np.float64), x)
        # f16 (GGUF keeps 1-D tensors f32)
        want16 = x32.astype(np.float16).astype(np.float64) if x.ndim == 2 else x
        assert np.array_equal(f16.tensors[name].full(), want16), name
        # bf16 by explicit nearest-even selection between the two neighbouring bf16 values
        bits = x32.view(np.uint32).astype(np.uint64)
        lo = (bits & 0xFFFF0000).astype(np.uint32).view(np.float32).astype(np.float64)
        hi = ((bits & 0xFFFF0000) + 0x10000).astype(np.uint32).view(np.float32).astype(np.float64)
        dlo, dhi = np.abs(x - lo), np.abs(hi - x)
        lo_even = ((bits >> 16) & 1) == 0
        want_b = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo_even, lo, hi)))
        assert np.array_equal(bf16.tensors[name].full(), want_b), name
    # q8_0: matrices only; per block d = f16(max|x| / 127) and every value within ~d/2
    name = "model.layers.0.mlp.gate_proj.weight"
    x = base.tensors[name].full().reshape(-1, 32)
    t = q8.tensors[name]
    assert t.dtype == "Q8_0"
    blocks = t.buf.view(ref.Q8_0_DTYPE)
    d = blocks["d"].astype(np.float64)
    want_d = (np.abs(x).max(axis=1).astype(np.float32) / np.float32(127)).astype(np.float16).astype(np.float64)
    assert np.array_equal(d, want_d)
    deq = t.full().reshape(-1, 32)
    # |d16 q - x| <= |d32 q - x| + |d16 - d32| |q| <= d/2 + 127 d 2^-10 (f16 rounding of d)
    assert np.all(np.abs(deq - x) <= d[:, None] * (0.5 + 127 * 2.0 ** -10) + 1e-12)
    assert np.abs(blocks["q"]).max() == 127
    assert q8.tensors["model.layers.0.input_layernorm.weight"].dtype == "F32"
    # end to end: quantized logits stay close to the f32 ones
    l0 = ref.logits(base, TOKENS)
    for m, bound in ((f16, 5e-3), (bf16, 5e-2), (q8, 5e-2)):
        e = rel_err(ref.logits(m, TOKENS), l0)
        assert e < bound, (m.source, e)


@check
def gguf_metadata_as_llama_cpp_writes_it():
    m = ref.load_model(make("tiny-q3.gguf", "--config", "tiny", "--format", "gguf", "--seed", "7", "--init-std", "fan"))
    g = m.gguf
    md, ty = g.metadata, g.metadata_types
    U32, F32, STR, ARR, BOOL = 4, 6, 8, 9, 7
    want = {"general.architecture": (STR, "qwen3"), "qwen3.block_count": (U32, 2),
            "qwen3.context_length": (U32, 40960), "qwen3.embedding_length": (U32, 64),
            "qwen3.feed_forward_length": (U32, 128), "qwen3.attention.head_count": (U32, 4),
            "qwen3.attention.head_count_kv": (U32, 2), "qwen3.attention.key_length": (U32, 32),
            "qwen3.attention.value_length": (U32, 32), "qwen3.rope.freq_base": (F32, 1e6),
            "tokenizer.ggml.model": (STR, "gpt2"), "tokenizer.ggml.pre": (STR, "qwen2"),
            "tokenizer.ggml.bos_token_id": (U32, 151643), "tokenizer.ggml.eos_token_id": (U32, 151645),
            "tokenizer.ggml.padding_token_id": (U32, 151643), "tokenizer.ggml.add_bos_token": (BOOL, False)}
    for k, (t, v) in want.items():
        assert ty.get(k) == t and md[k] == v, (k, ty.get(k), md.get(k))
    assert ty["qwen3.attention.layer_norm_rms_epsilon"] == F32
    assert abs(md["qwen3.attention.layer_norm_rms_epsilon"] - 1e-6) < 1e-12
    assert ty["tokenizer.ggml.tokens"] == ARR and len(md["tokenizer.ggml.tokens"]) == 151936
    toks, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    expect = {0: ("!", 1), 9707: ("Hello", 1), 151643: ("<|endoftext|>", 3), 151645: ("<|im_end|>", 3),
              151657: ("<tool_call>", 4), 151659: ("<|fim_prefix|>", 3), 151667: ("<think>", 4),
              151669: ("[PAD151669]", 5), 151935: ("[PAD151935]", 5)}
    for i, (s, t) in expect.items():
        assert toks[i] == s and types[i] == t, (i, toks[i], types[i])
    assert md["tokenizer.ggml.merges"][:2] == ["\u0120 \u0120", "\u0120\u0120 \u0120\u0120"]
    assert "<|im_start|>" in md["tokenizer.chat_template"]
    names = list(g.tensors)
    assert names[0] == "token_embd.weight" and names[-1] == "output_norm.weight" and "output.weight" not in names
    assert g.tensors["blk.0.attn_q.weight"].shape == (128, 64)  # ne = [64, 128]
    assert g.alignment == 32 and g.data_start % 32 == 0
    q2 = ref.load_model(make("tiny-q2u.gguf", "--config", "tiny", "--format", "gguf", "--seed", "7",
                             "--init-std", "fan", "--arch", "qwen2", "--untied")).gguf
    assert q2.metadata["general.architecture"] == "qwen2" and "output.weight" in q2.tensors
    assert "blk.1.attn_v.bias" in q2.tensors and "blk.0.attn_q_norm.weight" not in q2.tensors
    assert q2.metadata["qwen2.attention.key_length"] == 16


@check
def hf_config_json_fields():
    d = make("tiny-q3-hf", "--config", "tiny", "--format", "hf", "--seed", "7", "--init-std", "fan")
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    want = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 151936, "rope_theta": 1e6,
            "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "torch_dtype": "float32",
            "hidden_act": "silu", "attention_bias": False, "bos_token_id": 151643, "eos_token_id": 151645}
    for k, v in want.items():
        assert c.get(k) == v, (k, c.get(k))
    assert os.path.isfile(os.path.join(d, "tokenizer.json")) and os.path.isfile(os.path.join(d, "tokenizer_config.json"))
    d2 = make("tiny-q2u-hf", "--config", "tiny", "--format", "hf", "--seed", "7", "--init-std", "fan",
              "--arch", "qwen2", "--untied")
    with open(os.path.join(d2, "config.json")) as f:
        c2 = json.load(f)
    assert c2["model_type"] == "qwen2" and c2["architectures"] == ["Qwen2ForCausalLM"]
    assert "head_dim" not in c2 and c2["tie_word_embeddings"] is False
    assert "lm_head.weight" in ref.load_model(d2).tensors


def main():
    if not os.path.isfile(os.path.join(TOKENIZER, "tokenizer.json")):
        print(f"tokenizer not found in {TOKENIZER} (run tools/fetch-tokenizer.sh)")
        print("0 passed, 1 failed")
        return 1
    os.makedirs(WORK, exist_ok=True)
    passed = failed = 0
    for fn in CHECKS:
        try:
            fn()
            print(f"PASS {fn.__name__}", flush=True)
            passed += 1
        except Exception as e:  # noqa: BLE001
            print(f"FAIL {fn.__name__}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
