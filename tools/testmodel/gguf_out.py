"""Streaming GGUF v3 writer (layout per ggml docs/gguf.md).

File: "GGUF" | u32 version 3 | u64 n_tensors | u64 n_kv | kv pairs | tensor infos | zero padding to
ALIGNMENT | tensor data. A kv pair is: string key, u32 value type, value. Strings are u64 byte length
+ UTF-8 bytes; arrays are u32 element type, u64 count, elements. A tensor info is: string name, u32
n_dims, u64 ne[n_dims] (innermost first, so a PyTorch [out, in] weight has ne = [in, out]), u32 ggml
type, u64 offset of its data from the start of the data section (a multiple of ALIGNMENT). All
little endian. Each tensor's data is followed by zero padding up to the next multiple of ALIGNMENT.
"""
from __future__ import annotations

import struct
from typing import Callable, Iterable

ALIGNMENT = 32

T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64 = 4, 5, 6, 7, 8, 9, 10


def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, kind: str, value) -> bytes:
    out = [_str(key)]
    if kind == "string":
        out += [struct.pack("<I", T_STRING), _str(value)]
    elif kind == "uint32":
        out.append(struct.pack("<II", T_UINT32, value))
    elif kind == "float32":
        out.append(struct.pack("<If", T_FLOAT32, value))
    elif kind == "bool":
        out.append(struct.pack("<IB", T_BOOL, 1 if value else 0))
    elif kind == "string_array":
        out.append(struct.pack("<IIQ", T_ARRAY, T_STRING, len(value)))
        out.append(b"".join(_str(s) for s in value))
    elif kind == "int32_array":
        out.append(struct.pack("<IIQ", T_ARRAY, T_INT32, len(value)))
        out.append(struct.pack(f"<{len(value)}i", *value))
    else:
        raise ValueError(kind)
    return b"".join(out)


def _pad(n: int) -> int:
    return (-n) % ALIGNMENT


class GgufTensor:
    """name, torch-order shape, ggml type id, byte size, and a callable yielding its bytes."""

    def __init__(self, name: str, shape: tuple, ggml_type: int, nbytes: int,
                 chunks: Callable[[], Iterable[bytes]]):
        self.name, self.shape, self.ggml_type, self.nbytes, self.chunks = name, shape, ggml_type, nbytes, chunks


def write_gguf(path: str, metadata: list, tensors: list, progress: Callable[[int, GgufTensor], None] | None = None) -> int:
    """metadata: [(key, kind, value)], kind in string/uint32/float32/bool/string_array/int32_array.
    Returns the file size."""
    header = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(metadata))]
    header += [_kv(k, kind, v) for k, kind, v in metadata]
    offset = 0
    for t in tensors:
        ne = list(reversed(t.shape))
        header.append(_str(t.name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                      + struct.pack("<IQ", t.ggml_type, offset))
        offset += t.nbytes + _pad(t.nbytes)
    head = b"".join(header)
    head += b"\0" * _pad(len(head))
    with open(path, "wb", buffering=1 << 22) as f:
        f.write(head)
        for i, t in enumerate(tensors):
            written = 0
            for c in t.chunks():
                f.write(c)
                written += len(c)
            if written != t.nbytes:
                raise AssertionError(f"{t.name}: wrote {written} bytes, expected {t.nbytes}")
            f.write(b"\0" * _pad(written))
            if progress:
                progress(i, t)
        size = f.tell()
    assert size == len(head) + offset
    return size
