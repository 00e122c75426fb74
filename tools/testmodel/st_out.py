"""Streaming safetensors writer (format per huggingface/safetensors README).

File: u64 LE header length N | N bytes of JSON {"__metadata__": {"format": "pt"}, name: {"dtype":
"F32"|"F16"|"BF16", "shape": [..] (PyTorch order), "data_offsets": [begin, end]}, ...}, padded with
spaces so that 8 + N is a multiple of 8 | tensor bytes, offsets relative to the end of the header.

Models whose data exceed the shard size go into model-0000k-of-0000n.safetensors files plus
model.safetensors.index.json {"metadata": {"total_size": bytes}, "weight_map": {name: file}}, with
tensors assigned in order and a new shard started when the next tensor would overflow the current
one (as transformers' save_pretrained does); otherwise a single model.safetensors.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Callable

ST_DTYPE = {"f32": "F32", "f16": "F16", "bf16": "BF16"}


class StTensor:
    def __init__(self, name: str, shape: tuple, dtype: str, nbytes: int, chunks: Callable):
        self.name, self.shape, self.dtype, self.nbytes, self.chunks = name, shape, dtype, nbytes, chunks


def _write_file(path: str, tensors: list, progress) -> None:
    hdr = {"__metadata__": {"format": "pt"}}
    off = 0
    for t in tensors:
        hdr[t.name] = {"dtype": ST_DTYPE[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + t.nbytes]}
        off += t.nbytes
    js = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
    js += b" " * ((-(8 + len(js))) % 8)
    with open(path, "wb", buffering=1 << 22) as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for t in tensors:
            written = 0
            for c in t.chunks():
                f.write(c)
                written += len(c)
            if written != t.nbytes:
                raise AssertionError(f"{t.name}: wrote {written} bytes, expected {t.nbytes}")
            if progress:
                progress(t)


def write_safetensors_dir(out_dir: str, tensors: list, shard_bytes: int, progress=None) -> list:
    """Writes model.safetensors or shards + index into out_dir. Returns the file names."""
    total = sum(t.nbytes for t in tensors)
    if total <= shard_bytes:
        _write_file(os.path.join(out_dir, "model.safetensors"), tensors, progress)
        return ["model.safetensors"]
    shards, cur, cur_size = [], [], 0
    for t in tensors:
        if cur and cur_size + t.nbytes > shard_bytes:
            shards.append(cur)
            cur, cur_size = [], 0
        cur.append(t)
        cur_size += t.nbytes
    if cur:
        shards.append(cur)
    n = len(shards)
    names, weight_map = [], {}
    for k, shard in enumerate(shards, start=1):
        fname = f"model-{k:05d}-of-{n:05d}.safetensors"
        _write_file(os.path.join(out_dir, fname), shard, progress)
        names.append(fname)
        for t in shard:
            weight_map[t.name] = fname
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")
    return names + ["model.safetensors.index.json"]
