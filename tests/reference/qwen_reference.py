#!/usr/bin/python3
"""Float64 numpy reference forward pass of Qwen3 and Qwen2/Qwen2.5 decoder-only models.

Written from the architecture (Hugging Face transformers' Qwen3/Qwen2 modelling, the Qwen3
technical report) and from the file-format specifications (ggml docs/gguf.md; the safetensors
README), with its own readers: nothing here is shared with the test-model maker in tools/ or with
the C++ engine, so agreement between them is evidence that both are right.

API
  load_model(path) -> Model      path: a .gguf file, or a Hugging Face directory holding
                                 config.json and model.safetensors (or sharded safetensors +
                                 model.safetensors.index.json). Tensors stay memory-mapped and are
                                 dequantized to float64 on use, a block of rows at a time.
  logits(model, token_ids) -> np.ndarray float64 [n_tokens, vocab]: one sequence, positions
                                 0..n-1, no cache.

Forward pass (all float64; x is [n, hidden]):
  x = E[tokens]                                       E: embedding [vocab, hidden]
  per layer:
    h = rmsnorm(x) * w_attn_norm                      rmsnorm(x) = x / sqrt(mean(x^2) + eps)
    q = h Wq^T (+ bq), k = h Wk^T (+ bk), v = h Wv^T (+ bv)     biases: Qwen2 only
    q, k reshaped to [n, heads, head_dim], [n, kv_heads, head_dim]
    Qwen3 only: q = rmsnorm(q) * w_q_norm, k = rmsnorm(k) * w_k_norm, over head_dim, per head
    q, k = rope(q), rope(k)                           NeoX "rotate half": pairs (i, i + d/2)
                                                      rotated by pos * theta^(-2i/d)
    attention per query head hq with kv head hq // (heads / kv_heads), scores q.k / sqrt(d),
      causal mask, softmax over keys, weighted sum of v
    x = x + concat(heads) Wo^T
    h = rmsnorm(x) * w_ffn_norm
    x = x + Wdown^T-applied( silu(h Wgate^T) * (h Wup^T) )         silu(z) = z / (1 + e^-z)
  x = rmsnorm(x) * w_final_norm
  logits = x W_out^T                                  W_out = E when the embeddings are tied

CLI
  /usr/bin/python3 tests/reference/qwen_reference.py --model PATH --tokens 1,2,3 --out FILE
      [--dtype f32|f64]   writes raw little-endian logits [n_tokens, vocab], row-major.
"""
from __future__ import annotations

import argparse
import json
import math
import mmap
import os
import struct
import sys

import numpy as np

# ----------------------------------------------------------------------------------------------
# Element decoding (storage type -> float64)
# ----------------------------------------------------------------------------------------------

# ggml type ids (GGUF spec): 0 F32, 1 F16, 8 Q8_0, 30 BF16.
GGML_TYPES = {0: "F32", 1: "F16", 8: "Q8_0", 30: "BF16"}
# Q8_0 block: f16 scale d, then 32 int8 quants; x[i] = d * q[i]. 34 bytes, no padding.
Q8_0_DTYPE = np.dtype([("d", "<f2"), ("q", "i1", (32,))])


def element_bytes(dtype: str, n: int) -> int:
    """Bytes used by n consecutive elements (n a multiple of 32 for Q8_0)."""
    if dtype in ("F32",):
        return 4 * n
    if dtype in ("F16", "BF16"):
        return 2 * n
    if dtype == "F64":
        return 8 * n
    if dtype == "Q8_0":
        if n % 32:
            raise ValueError(f"Q8_0 row of {n} elements is not a whole number of blocks")
        return n // 32 * 34
    raise ValueError(f"unsupported dtype {dtype}")


def decode(buf: np.ndarray, dtype: str, n: int) -> np.ndarray:
    """uint8 buffer holding n elements of `dtype` (little endian) -> float64 [n]."""
    if dtype == "F32":
        return buf.view("<f4").astype(np.float64)
    if dtype == "F64":
        return buf.view("<f8").astype(np.float64)
    if dtype == "F16":
        return buf.view("<f2").astype(np.float64)
    if dtype == "BF16":
        # bfloat16 is the high half of a binary32
        return (buf.view("<u2").astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if dtype == "Q8_0":
        blocks = buf.view(Q8_0_DTYPE)
        return (blocks["d"].astype(np.float64)[:, None] * blocks["q"].astype(np.float64)).reshape(n)
    raise ValueError(f"unsupported dtype {dtype}")


class RawTensor:
    """A tensor stored row-major in a byte buffer. shape is outermost first (PyTorch order)."""

    def __init__(self, name: str, shape: tuple, dtype: str, buf: np.ndarray):
        self.name, self.shape, self.dtype = name, tuple(int(s) for s in shape), dtype
        self.cols = self.shape[-1] if self.shape else 1
        self.n_rows = math.prod(self.shape[:-1]) if len(self.shape) > 1 else 1
        self.row_bytes = element_bytes(dtype, self.cols)
        if buf.size != self.row_bytes * self.n_rows:
            raise ValueError(f"{name}: {buf.size} bytes for shape {self.shape} {dtype}")
        self.buf = buf

    def rows(self, r0: int, r1: int) -> np.ndarray:
        """float64 [r1 - r0, cols]."""
        b = np.ascontiguousarray(self.buf[r0 * self.row_bytes:r1 * self.row_bytes])
        return decode(b, self.dtype, (r1 - r0) * self.cols).reshape(r1 - r0, self.cols)

    def take_rows(self, idx) -> np.ndarray:
        return np.stack([self.rows(int(i), int(i) + 1)[0] for i in idx])

    def full(self) -> np.ndarray:
        return self.rows(0, self.n_rows).reshape(self.shape)


def _map_file(path: str) -> np.ndarray:
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(mm, dtype=np.uint8)


# ----------------------------------------------------------------------------------------------
# GGUF reader (ggml docs/gguf.md, version 2 and 3)
# ----------------------------------------------------------------------------------------------

_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}


class _Cursor:
    def __init__(self, data: np.ndarray, path: str):
        self.data, self.pos, self.path = data, 0, path
        self.mv = memoryview(data)

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError(f"{self.path}: truncated at byte {self.pos}")
        v = struct.unpack_from(fmt, self.mv, self.pos)
        self.pos += size
        return v[0] if len(v) == 1 else v

    def string(self) -> str:
        n = self.take("<Q")
        if self.pos + n > len(self.data):
            raise ValueError(f"{self.path}: string past end of file at byte {self.pos}")
        s = bytes(self.mv[self.pos:self.pos + n]).decode("utf-8", errors="surrogateescape")
        self.pos += n
        return s

    def value(self, vtype: int):
        if vtype in _GGUF_SCALARS:
            return self.take(_GGUF_SCALARS[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            etype = self.take("<I")
            count = self.take("<Q")
            return [self.value(etype) for _ in range(count)]
        raise ValueError(f"{self.path}: unknown metadata value type {vtype}")


class GgufFile:
    """metadata: dict key -> python value; tensors: dict name -> RawTensor (PyTorch-order shape,
    i.e. the GGUF ne[] reversed)."""

    def __init__(self, path: str):
        data = _map_file(path)
        c = _Cursor(data, path)
        if bytes(c.mv[:4]) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        c.pos = 4
        self.version = c.take("<I")
        if self.version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {self.version}")
        n_tensors, n_kv = c.take("<Q"), c.take("<Q")
        self.metadata = {}
        self.metadata_types = {}
        for _ in range(n_kv):
            key = c.string()
            vtype = c.take("<I")
            self.metadata_types[key] = vtype
            self.metadata[key] = c.value(vtype)
        infos = []
        for _ in range(n_tensors):
            name = c.string()
            nd = c.take("<I")
            ne = [c.take("<Q") for _ in range(nd)]
            ttype, off = c.take("<I"), c.take("<Q")
            infos.append((name, ne, ttype, off))
        self.alignment = int(self.metadata.get("general.alignment", 32))
        self.data_start = (c.pos + self.alignment - 1) // self.alignment * self.alignment
        self.tensors = {}
        self.tensor_types = {}
        for name, ne, ttype, off in infos:
            if ttype not in GGML_TYPES:
                raise ValueError(f"{path}: tensor {name}: unsupported ggml type {ttype}")
            if off % self.alignment:
                raise ValueError(f"{path}: tensor {name}: offset {off} not aligned")
            shape = tuple(reversed(ne))
            nbytes = element_bytes(GGML_TYPES[ttype], ne[0]) * (math.prod(ne[1:]) if len(ne) > 1 else 1)
            begin = self.data_start + off
            if begin + nbytes > len(data):
                raise ValueError(f"{path}: tensor {name} data past end of file")
            self.tensors[name] = RawTensor(name, shape, GGML_TYPES[ttype], data[begin:begin + nbytes])
            self.tensor_types[name] = ttype


# ----------------------------------------------------------------------------------------------
# safetensors reader (huggingface/safetensors README)
# ----------------------------------------------------------------------------------------------

def read_safetensors(path: str) -> dict:
    """name -> RawTensor for one .safetensors file."""
    data = _map_file(path)
    (hlen,) = struct.unpack_from("<Q", memoryview(data), 0)
    if 8 + hlen > len(data):
        raise ValueError(f"{path}: header past end of file")
    header = json.loads(bytes(data[8:8 + hlen]).decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        if base + e > len(data) or b > e:
            raise ValueError(f"{path}: tensor {name} offsets out of range")
        out[name] = RawTensor(name, tuple(info["shape"]), info["dtype"], data[base + b:base + e])
    return out


def read_hf_dir(path: str) -> dict:
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
        tensors = {}
        for fname in sorted(set(weight_map.values())):
            shard = read_safetensors(os.path.join(path, fname))
            for name, t in shard.items():
                if weight_map.get(name) == fname:
                    tensors[name] = t
        missing = [n for n in weight_map if n not in tensors]
        if missing:
            raise ValueError(f"{path}: tensors listed in the index but absent: {missing[:5]}")
        return tensors
    return read_safetensors(os.path.join(path, "model.safetensors"))


# ----------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------

class Model:
    """arch ("qwen3" | "qwen2"), hyper-parameters, and tensors under Hugging Face names."""

    def __init__(self, arch, n_layers, hidden, intermediate, n_heads, n_kv_heads, head_dim,
                 rope_theta, eps, tensors: dict, tied: bool, source: str):
        self.arch, self.n_layers, self.hidden, self.intermediate = arch, n_layers, hidden, intermediate
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim
        self.rope_theta, self.eps = float(rope_theta), float(eps)
        self.tensors, self.tied, self.source = tensors, tied, source
        self.vocab = tensors["model.embed_tokens.weight"].shape[0]
        self._check()

    def _expected_shapes(self) -> dict:
        H, I, V, hd = self.hidden, self.intermediate, self.vocab, self.head_dim
        qd, kvd = self.n_heads * hd, self.n_kv_heads * hd
        s = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
        if not self.tied:
            s["lm_head.weight"] = (V, H)
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            s.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                      p + "self_attn.q_proj.weight": (qd, H), p + "self_attn.k_proj.weight": (kvd, H),
                      p + "self_attn.v_proj.weight": (kvd, H), p + "self_attn.o_proj.weight": (H, qd),
                      p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                      p + "mlp.down_proj.weight": (H, I)})
            if self.arch == "qwen3":
                s[p + "self_attn.q_norm.weight"] = (hd,)
                s[p + "self_attn.k_norm.weight"] = (hd,)
            else:
                s[p + "self_attn.q_proj.bias"] = (qd,)
                s[p + "self_attn.k_proj.bias"] = (kvd,)
                s[p + "self_attn.v_proj.bias"] = (kvd,)
        return s

    def _check(self):
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.source}: {self.n_heads} heads not a multiple of {self.n_kv_heads} kv heads")
        for name, shape in self._expected_shapes().items():
            t = self.tensors.get(name)
            if t is None:
                raise ValueError(f"{self.source}: missing tensor {name}")
            if t.shape != shape:
                raise ValueError(f"{self.source}: tensor {name} has shape {t.shape}, expected {shape}")

    def vector(self, name: str) -> np.ndarray:
        return self.tensors[name].full()

    def linear(self, x: np.ndarray, name: str, rows_per_block: int = 0) -> np.ndarray:
        """x [n, in] float64 -> x W^T [n, out] for the [out, in] weight `name`, dequantizing W a
        block of rows at a time (bounded memory for large vocabularies)."""
        t = self.tensors[name]
        out_dim, in_dim = t.shape
        assert x.shape[-1] == in_dim, (name, x.shape, t.shape)
        step = rows_per_block or max(1, (1 << 22) // in_dim)
        y = np.empty((x.shape[0], out_dim), dtype=np.float64)
        for r0 in range(0, out_dim, step):
            r1 = min(out_dim, r0 + step)
            y[:, r0:r1] = x @ t.rows(r0, r1).T
        return y


# GGUF tensor names (llama.cpp convention) -> Hugging Face names.
_GGUF_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight", "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_GGUF_GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight",
                      "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}


def _hf_name_of_gguf(name: str) -> str:
    if name in _GGUF_GLOBAL_NAMES:
        return _GGUF_GLOBAL_NAMES[name]
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _GGUF_LAYER_NAMES:
        return f"model.layers.{int(parts[1])}.{_GGUF_LAYER_NAMES[parts[2]]}"
    raise ValueError(f"unknown GGUF tensor {name}")


def load_gguf(path: str) -> Model:
    g = GgufFile(path)
    md = g.metadata
    arch = md["general.architecture"]
    if arch not in ("qwen3", "qwen2"):
        raise ValueError(f"{path}: architecture {arch!r} is not qwen3/qwen2")
    hidden = int(md[f"{arch}.embedding_length"])
    heads = int(md[f"{arch}.attention.head_count"])
    tensors = {_hf_name_of_gguf(n): t for n, t in g.tensors.items()}
    m = Model(arch=arch, n_layers=int(md[f"{arch}.block_count"]), hidden=hidden,
              intermediate=int(md[f"{arch}.feed_forward_length"]), n_heads=heads,
              n_kv_heads=int(md.get(f"{arch}.attention.head_count_kv", heads)),
              head_dim=int(md.get(f"{arch}.attention.key_length", hidden // heads)),
              rope_theta=float(md.get(f"{arch}.rope.freq_base", 10000.0)),
              eps=float(md[f"{arch}.attention.layer_norm_rms_epsilon"]),
              tensors=tensors, tied="lm_head.weight" not in tensors, source=path)
    m.gguf = g
    return m


def load_hf(path: str) -> Model:
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    arch = cfg["model_type"]
    if arch not in ("qwen3", "qwen2"):
        raise ValueError(f"{path}: model_type {arch!r} is not qwen3/qwen2")
    if cfg.get("rope_scaling"):
        raise NotImplementedError(f"{path}: rope_scaling is not supported by the reference")
    tensors = read_hf_dir(path)
    tied = bool(cfg.get("tie_word_embeddings", False))
    if tied:
        tensors.pop("lm_head.weight", None)
    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    return Model(arch=arch, n_layers=int(cfg["num_hidden_layers"]), hidden=hidden,
                 intermediate=int(cfg["intermediate_size"]), n_heads=heads,
                 n_kv_heads=int(cfg.get("num_key_value_heads", heads)),
                 head_dim=int(cfg.get("head_dim") or hidden // heads),
                 rope_theta=float(cfg.get("rope_theta", 10000.0)), eps=float(cfg["rms_norm_eps"]),
                 tensors=tensors, tied=tied, source=path)


def load_model(path: str) -> Model:
    """A .gguf file or a Hugging Face model directory."""
    if os.path.isdir(path):
        return load_hf(path)
    return load_gguf(path)


# ----------------------------------------------------------------------------------------------
# Building blocks (float64)
# ----------------------------------------------------------------------------------------------

def rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2 over the last axis) + eps) * weight."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """NeoX / HF "rotate_half" RoPE. x [n, heads, d], positions [n]. For i < d/2, the pair
    (x[i], x[i + d/2]) is rotated by angle pos * theta^(-2i/d):
      out[i] = x[i] cos - x[i+d/2] sin,  out[i+d/2] = x[i+d/2] cos + x[i] sin."""
    d = x.shape[-1]
    half = d // 2
    inv_freq = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = positions.astype(np.float64)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """q [n, H, d], k and v [n, KV, d] -> [n, H, d]. Query head h attends with kv head
    h // (H / KV); scores q.k / sqrt(d); key j is visible to query i iff j <= i."""
    n, H, d = q.shape
    group = H // k.shape[1]
    future = np.triu(np.ones((n, n), dtype=bool), 1)
    out = np.empty_like(q)
    for h in range(H):
        kh = h // group
        s = (q[:, h, :] @ k[:, kh, :].T) / math.sqrt(d)
        s[future] = -np.inf
        s -= s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        out[:, h, :] = p @ v[:, kh, :]
    return out


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def logits(model: Model, token_ids) -> np.ndarray:
    """float64 [n_tokens, vocab] logits of one sequence starting at position 0."""
    ids = np.asarray(list(token_ids), dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("token_ids must be a non-empty sequence")
    if ids.min() < 0 or ids.max() >= model.vocab:
        raise ValueError(f"token id out of range [0, {model.vocab})")
    n = ids.size
    pos = np.arange(n)
    H, KV, hd, eps = model.n_heads, model.n_kv_heads, model.head_dim, model.eps
    x = model.tensors["model.embed_tokens.weight"].take_rows(ids)
    for i in range(model.n_layers):
        p = f"model.layers.{i}."
        h = rmsnorm(x, model.vector(p + "input_layernorm.weight"), eps)
        q = model.linear(h, p + "self_attn.q_proj.weight")
        k = model.linear(h, p + "self_attn.k_proj.weight")
        v = model.linear(h, p + "self_attn.v_proj.weight")
        if model.arch == "qwen2":
            q = q + model.vector(p + "self_attn.q_proj.bias")
            k = k + model.vector(p + "self_attn.k_proj.bias")
            v = v + model.vector(p + "self_attn.v_proj.bias")
        q, k, v = q.reshape(n, H, hd), k.reshape(n, KV, hd), v.reshape(n, KV, hd)
        if model.arch == "qwen3":
            q = rmsnorm(q, model.vector(p + "self_attn.q_norm.weight"), eps)
            k = rmsnorm(k, model.vector(p + "self_attn.k_norm.weight"), eps)
        q, k = rope(q, pos, model.rope_theta), rope(k, pos, model.rope_theta)
        a = causal_attention(q, k, v).reshape(n, H * hd)
        x = x + model.linear(a, p + "self_attn.o_proj.weight")
        h = rmsnorm(x, model.vector(p + "post_attention_layernorm.weight"), eps)
        g = model.linear(h, p + "mlp.gate_proj.weight")
        u = model.linear(h, p + "mlp.up_proj.weight")
        x = x + model.linear(silu(g) * u, p + "mlp.down_proj.weight")
    x = rmsnorm(x, model.vector("model.norm.weight"), eps)
    return model.linear(x, "model.embed_tokens.weight" if model.tied else "lm_head.weight")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="float64 reference logits of a Qwen3/Qwen2 model")
    ap.add_argument("--model", required=True, help=".gguf file or Hugging Face directory")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="raw little-endian logits [n_tokens, vocab]")
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    a = ap.parse_args(argv)
    ids = [int(t) for t in a.tokens.split(",") if t.strip()]
    m = load_model(a.model)
    out = logits(m, ids)
    out.astype("<f4" if a.dtype == "f32" else "<f8").tofile(a.out)
    print(f"{m.arch} {m.n_layers} layers, vocab {m.vocab}: wrote [{len(ids)}, {m.vocab}] {a.dtype} "
          f"to {a.out}; argmax {out.argmax(axis=1).tolist()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
