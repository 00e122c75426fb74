"""Command line of tools/qwenserve-make-test-model."""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import time

from . import configs, weights
from .gguf_out import GgufTensor, write_gguf
from .st_out import StTensor, write_safetensors_dir
from .vocab import gguf_vocab_metadata

GGUF_FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}  # llama_ftype ALL_F32, MOSTLY_*
HF_TORCH_DTYPE = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def _default_tokenizer_dir() -> str:
    env = os.environ.get("QS_TOKENIZER_DIR")
    if env:
        return env
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(repo, ".cache", "tokenizer-qwen3")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="qwenserve-make-test-model",
        description="Write a random-weight Qwen3 (or Qwen2) model as GGUF or as a Hugging Face "
                    "directory. Same seed => same weights in every format.")
    p.add_argument("--config", choices=["tiny", "small", "4b", "4b-2l"], required=True)
    p.add_argument("--format", choices=["gguf", "hf"], required=True)
    p.add_argument("--dtype", choices=["f32", "f16", "bf16", "q8_0"], default="f32",
                   help="matrix storage type (q8_0: gguf only); GGUF 1-D tensors are always f32")
    p.add_argument("--tokenizer", default=None,
                   help="directory with tokenizer.json and tokenizer_config.json "
                        "(default $QS_TOKENIZER_DIR or .cache/tokenizer-qwen3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output .gguf file, or directory for --format hf")
    p.add_argument("--arch", choices=["qwen3", "qwen2"], default="qwen3")
    p.add_argument("--untied", action="store_true", help="separate lm_head.weight / output.weight")
    p.add_argument("--init-std", default="0.02",
                   help="std of matrix weights, or 'fan' for 1/sqrt(fan_in) (default 0.02)")
    p.add_argument("--embed-std", type=float, default=None,
                   help="std of the token embedding (and lm_head) only, overriding --init-std: a "
                        "large value gives peaked output distributions (top-1 agreement tests)")
    p.add_argument("--vocab-size", type=int, default=None, help="default 151936")
    p.add_argument("--shard-size-mb", type=float, default=2000.0,
                   help="hf: shard when the weights exceed this many MB (10^6 bytes); default 2000")
    a = p.parse_args(argv)
    if a.dtype == "q8_0" and a.format != "gguf":
        p.error("--dtype q8_0 is only supported with --format gguf")
    if a.init_std != "fan":
        try:
            a.init_std = float(a.init_std)
        except ValueError:
            p.error("--init-std takes a number or 'fan'")
    a.tokenizer = a.tokenizer or _default_tokenizer_dir()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if not os.path.isfile(os.path.join(a.tokenizer, f)):
            p.error(f"{os.path.join(a.tokenizer, f)} not found (run tools/fetch-tokenizer.sh)")
    return a


class Progress:
    """Prints to stderr at most every 2 s, for outputs over 256 MB."""

    def __init__(self, total_bytes: int, n_tensors: int):
        self.total, self.n, self.done, self.count = total_bytes, n_tensors, 0, 0
        self.t0 = self.last = time.monotonic()
        self.enabled = total_bytes > (256 << 20)

    def __call__(self, nbytes: int, name: str):
        self.done += nbytes
        self.count += 1
        now = time.monotonic()
        if self.enabled and (now - self.last >= 2.0 or self.count == self.n):
            self.last = now
            print(f"[{self.count}/{self.n}] {name}: {self.done / 1e9:.2f} / {self.total / 1e9:.2f} GB, "
                  f"{now - self.t0:.1f} s", file=sys.stderr, flush=True)


EMBEDDING_NAMES = ("model.embed_tokens.weight", "lm_head.weight")


def _std_for(a, spec):
    return a.embed_std if a.embed_std is not None and spec.hf_name in EMBEDDING_NAMES else a.init_std


def _chunks(spec, seed, init_std, dtype):
    def gen():
        for a in weights.generate_chunks(spec, seed, init_std):
            yield weights.encode(a, dtype)
    return gen


def make_gguf(a, cfg, specs):
    arch = cfg.arch
    meta = [
        ("general.architecture", "string", arch),
        ("general.type", "string", "model"),
        ("general.name", "string", f"qwenserve test {cfg.name} {arch} seed {a.seed}"),
        (f"{arch}.block_count", "uint32", cfg.num_hidden_layers),
        (f"{arch}.context_length", "uint32", cfg.max_position_embeddings),
        (f"{arch}.embedding_length", "uint32", cfg.hidden_size),
        (f"{arch}.feed_forward_length", "uint32", cfg.intermediate_size),
        (f"{arch}.attention.head_count", "uint32", cfg.num_attention_heads),
        (f"{arch}.attention.head_count_kv", "uint32", cfg.num_key_value_heads),
        (f"{arch}.rope.freq_base", "float32", cfg.rope_theta),
        (f"{arch}.attention.layer_norm_rms_epsilon", "float32", cfg.rms_norm_eps),
        (f"{arch}.attention.key_length", "uint32", cfg.head_dim),
        (f"{arch}.attention.value_length", "uint32", cfg.head_dim),
        ("general.file_type", "uint32", GGUF_FILE_TYPE[a.dtype]),
        ("general.quantization_version", "uint32", 2),
    ]
    meta += gguf_vocab_metadata(a.tokenizer, cfg.vocab_size, configs.BOS_TOKEN_ID, configs.EOS_TOKEN_ID)
    tensors = []
    for s in specs:
        dt = weights.gguf_tensor_dtype(s, a.dtype)
        if dt == "q8_0" and s.shape[-1] % weights.Q8_0_BLOCK:
            raise SystemExit(f"{s.gguf_name}: row length {s.shape[-1]} is not a multiple of 32 (q8_0)")
        tensors.append(GgufTensor(s.gguf_name, s.shape, weights.GGML_TYPE_ID[dt],
                                  weights.encoded_nbytes(s.n_elements, dt), _chunks(s, a.seed, _std_for(a, s), dt)))
    prog = Progress(sum(t.nbytes for t in tensors), len(tensors))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".partial"
    size = write_gguf(tmp, meta, tensors, progress=lambda i, t: prog(t.nbytes, t.name))
    os.replace(tmp, a.out)
    return size


def make_hf(a, cfg, specs):
    os.makedirs(a.out, exist_ok=True)
    for old in glob.glob(os.path.join(a.out, "model*.safetensors")) + \
            glob.glob(os.path.join(a.out, "model.safetensors.index.json")):
        os.remove(old)
    with open(os.path.join(a.out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(configs.hf_config_json(cfg, HF_TORCH_DTYPE[a.dtype]), f, indent=2)
        f.write("\n")
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(a.tokenizer, fn), os.path.join(a.out, fn))
    tensors = [StTensor(s.hf_name, s.shape, a.dtype, weights.encoded_nbytes(s.n_elements, a.dtype),
                        _chunks(s, a.seed, _std_for(a, s), a.dtype)) for s in specs]
    prog = Progress(sum(t.nbytes for t in tensors), len(tensors))
    files = write_safetensors_dir(a.out, tensors, int(a.shard_size_mb * 1e6),
                                  progress=lambda t: prog(t.nbytes, t.name))
    return sum(os.path.getsize(os.path.join(a.out, f)) for f in files)


def main(argv=None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    cfg = configs.make_config(a.config, a.arch, a.untied, a.vocab_size)
    specs = weights.tensor_specs(cfg)
    t0 = time.monotonic()
    size = make_gguf(a, cfg, specs) if a.format == "gguf" else make_hf(a, cfg, specs)
    n_params = sum(s.n_elements for s in specs)
    print(f"wrote {a.out}: {cfg.name} {cfg.arch} {a.format} {a.dtype}, {n_params / 1e6:.1f} M params, "
          f"{size / 1e6:.1f} MB, {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return 0
