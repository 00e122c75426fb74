#!/usr/bin/python3
"""Bad-input test: the qwenserve CLI on corrupt, truncated and inconsistent model files.

Makes one tiny GGUF file and one tiny Hugging Face directory with tools/qwenserve-make-test-model,
then writes corrupt copies of them byte by byte (layouts: GGUF spec, ggml docs/gguf.md; safetensors
README) and runs `info`, `generate --max-tokens 2` and, where the tokenizer matters, `tokenize` on
each. Every failing command must:
  - exit with code exactly 1 (no signal, no abort, no other code);
  - print exactly one line on stderr, starting with "error: ";
  - name the file at fault (its path or basename) and the key words of the problem;
  - print no sanitizer report ("AddressSanitizer", "LeakSanitizer", "runtime error:"), so the test
    can also be run against the ASan/UBSan build (QS_BIN=build/asan/qwenserve).
The same commands must succeed on the uncorrupted models; `generate --json` must print one JSON
object with text, token_ids, prompt_token_ids, finish_reason and timings; and
`tokenize --text T | tokenize --decode --file /dev/stdin` must give back T.

Env: QS_BIN (the qwenserve binary), QS_SOURCE_DIR, QS_TOKENIZER_DIR, QS_WORK_DIR (scratch; files go
in QS_WORK_DIR/bad_input). Optional: QS_BAD_INPUT_CASES=comma-separated case names (or prefixes
ending in '*') to run a subset; QS_BAD_INPUT_JOBS=parallel cases (default 4).
Prints one line per case and ends with "N passed, M failed"; exits 1 on any failure.
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("QS_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QS_BIN = os.environ.get("QS_BIN", "")
TOKENIZER = os.environ.get("QS_TOKENIZER_DIR") or os.path.join(SRC, ".cache", "tokenizer-qwen3")
MAKER = os.path.join(SRC, "tools", "qwenserve-make-test-model")
WORK = os.path.join(os.environ.get("QS_WORK_DIR") or tempfile.mkdtemp(prefix="qs-bad-input-"), "bad_input")
JOBS = int(os.environ.get("QS_BAD_INPUT_JOBS", "4"))
CMD_TIMEOUT = 300  # seconds per command (ASan builds are slow)

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:",
                     "ThreadSanitizer", "MemorySanitizer")
PROMPT = "Hello"
ROUND_TRIP_TEXT = "Hello, world! Ünïcödé ñ 你好 🙂 <|im_start|>user\n  tabs\tand   spaces\r\n end"

# --------------------------------------------------------------------------------------------
# GGUF layout (ggml docs/gguf.md): "GGUF" | u32 version | u64 n_tensors | u64 n_kv | kv pairs |
# tensor infos | zero padding to general.alignment (default 32) | tensor data. A kv pair is: string
# key, u32 value type, value. Strings: u64 length + bytes. Arrays: u32 element type, u64 count,
# elements. Tensor info: string name, u32 n_dims, u64 ne[n_dims] (innermost first), u32 ggml type,
# u64 data offset relative to the data section. Little endian.
# --------------------------------------------------------------------------------------------
GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q",
               11: "<q", 12: "<d"}
T_UINT32, T_STRING, T_ARRAY = 4, 8, 9


class GgufLayout:
    """Byte positions of every field of a GGUF file (parsed once from the clean model)."""

    def __init__(self, data: bytes):
        self.data = data
        if data[:4] != b"GGUF":
            raise ValueError("not a GGUF file")
        self.version, self.n_tensors, self.n_kv = struct.unpack_from("<IQQ", data, 4)
        pos = 24
        self.kvs = []  # dicts: key, type, start, value_pos, end, value (scalars and strings)
        for _ in range(self.n_kv):
            start = pos
            key, pos = self._string(pos)
            (vtype,) = struct.unpack_from("<I", data, pos)
            value_pos = pos + 4
            value, pos = self._value(value_pos, vtype)
            self.kvs.append({"key": key, "type": vtype, "start": start, "value_pos": value_pos,
                             "end": pos, "value": value})
        self.infos_start = pos
        self.infos = []  # dicts: name, name_pos (bytes of the name), dims, dims_pos, type_pos, offset_pos
        for _ in range(self.n_tensors):
            start = pos
            (n,) = struct.unpack_from("<Q", data, pos)
            name_pos = pos + 8
            name = data[name_pos:name_pos + n].decode("utf-8")
            pos = name_pos + n
            (n_dims,) = struct.unpack_from("<I", data, pos)
            dims_pos = pos + 4
            dims = list(struct.unpack_from(f"<{n_dims}Q", data, dims_pos))
            pos = dims_pos + 8 * n_dims
            type_pos = pos
            (ttype, offset) = struct.unpack_from("<IQ", data, pos)
            pos += 12
            self.infos.append({"name": name, "start": start, "name_pos": name_pos, "dims": dims,
                               "dims_pos": dims_pos, "type": ttype, "type_pos": type_pos,
                               "offset": offset, "offset_pos": type_pos + 4, "end": pos})
        self.infos_end = pos
        alignment = self.kv("general.alignment")["value"] if self.has("general.alignment") else 32
        self.alignment = alignment
        self.data_start = pos + (-pos) % alignment

    def _string(self, pos):
        (n,) = struct.unpack_from("<Q", self.data, pos)
        return self.data[pos + 8:pos + 8 + n].decode("utf-8", "replace"), pos + 8 + n

    def _value(self, pos, vtype):
        if vtype in GGUF_SCALAR:
            fmt = GGUF_SCALAR[vtype]
            return struct.unpack_from(fmt, self.data, pos)[0], pos + struct.calcsize(fmt)
        if vtype == T_STRING:
            return self._string(pos)
        if vtype == T_ARRAY:
            etype, count = struct.unpack_from("<IQ", self.data, pos)
            pos += 12
            if etype in GGUF_SCALAR:
                return None, pos + count * struct.calcsize(GGUF_SCALAR[etype])
            for _ in range(count):
                _, pos = self._value(pos, etype)
            return None, pos
        raise ValueError(f"unknown GGUF value type {vtype}")

    def has(self, key):
        return any(kv["key"] == key for kv in self.kvs)

    def kv(self, key):
        for kv in self.kvs:
            if kv["key"] == key:
                return kv
        raise KeyError(key)

    def info(self, name):
        for t in self.infos:
            if t["name"] == name:
                return t
        raise KeyError(name)

    def rebuild(self, drop=lambda key: False, replace=None, add=(), alignment=None):
        """A new file without the kv pairs whose key `drop` accepts and with the kv pairs in
        `replace` (key -> full raw kv bytes) substituted; tensor infos and data are kept and the
        data section re-aligned (tensor offsets are relative to it, so they stay valid)."""
        replace = replace or {}
        kvs = []
        for kv in self.kvs:
            if drop(kv["key"]):
                continue
            kvs.append(replace.get(kv["key"], self.data[kv["start"]:kv["end"]]))
        kvs += list(add)
        head = b"GGUF" + struct.pack("<IQQ", self.version, self.n_tensors, len(kvs)) + b"".join(kvs)
        head += self.data[self.infos_start:self.infos_end]
        head += b"\0" * ((-len(head)) % (alignment or self.alignment))
        return head + self.data[self.data_start:]


def gguf_str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv_string(key: str, value: str) -> bytes:
    return gguf_str(key) + struct.pack("<I", T_STRING) + gguf_str(value)


def gguf_kv_uint32(key: str, value: int) -> bytes:
    return gguf_str(key) + struct.pack("<II", T_UINT32, value)


# --------------------------------------------------------------------------------------------
# safetensors layout (huggingface/safetensors README): u64 header length N | N bytes of JSON
# {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}} | data buffer
# (offsets relative to its start).
# --------------------------------------------------------------------------------------------
def st_split(data: bytes):
    (n,) = struct.unpack_from("<Q", data, 0)
    return json.loads(data[8:8 + n]), data[8 + n:]


def st_join(header: dict, buffer: bytes) -> bytes:
    js = json.dumps(header, separators=(",", ":")).encode("utf-8")
    js += b" " * ((-(8 + len(js))) % 8)
    return struct.pack("<Q", len(js)) + js + buffer


# --------------------------------------------------------------------------------------------
# Running the CLI and judging its output
# --------------------------------------------------------------------------------------------
def run_cli(args, stdin=None):
    t0 = time.monotonic()
    try:
        p = subprocess.run([QS_BIN] + args, input=stdin, capture_output=True, timeout=CMD_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, b"", b"", time.monotonic() - t0
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def show(b: bytes, limit=600) -> str:
    s = b.decode("utf-8", "replace")
    return repr(s if len(s) <= limit else s[:limit] + "...")


def sanitizer_problem(stderr: str):
    for marker in SANITIZER_MARKERS:
        if marker in stderr:
            return f"sanitizer report ({marker})"
    return None


def command_args(cmd, path):
    if cmd == "info":
        return ["info", "-m", path]
    if cmd == "generate":
        return ["generate", "-m", path, "-p", PROMPT, "--max-tokens", "2", "--seed", "1"]
    if cmd == "tokenize":
        return ["tokenize", "-m", path, "--text", PROMPT]
    raise ValueError(cmd)


def expect_error(cmd, path, names, keywords, args=None):
    """Runs `cmd` on `path` (or the CLI with `args`); returns a list of problems (empty when it
    failed cleanly)."""
    rc, out, err, _ = run_cli(args or command_args(cmd, path))
    if rc is None:
        return [f"{cmd}: timed out after {CMD_TIMEOUT} s"]
    text = err.decode("utf-8", "replace")
    problems = []
    if rc < 0:
        problems.append(f"killed by signal {-rc}")
    elif rc != 1:
        problems.append(f"exit code {rc}, expected 1")
    san = sanitizer_problem(text)
    if san:
        problems.append(san)
    if not text.startswith("error: "):
        problems.append("stderr does not start with 'error: '")
    if text.count("\n") != 1 or not text.endswith("\n"):
        problems.append(f"stderr has {text.count(chr(10))} newlines, expected exactly one line")
    line = text.split("\n", 1)[0]
    if not any(n in line for n in names):
        problems.append("message names none of " + ", ".join(repr(n) for n in names))
    missing = [k for k in keywords if k.lower() not in line.lower()]
    if missing:
        problems.append("message lacks " + ", ".join(repr(k) for k in missing))
    if problems:
        return [f"{cmd}: " + "; ".join(problems) + f"; stderr={show(err)}"]
    return []


def expect_ok(cmd_args, stdout_re=None, stdout_not_re=None):
    rc, out, err, _ = run_cli(cmd_args)
    name = cmd_args[0]
    if rc is None:
        return [f"{name}: timed out after {CMD_TIMEOUT} s"], out
    text = err.decode("utf-8", "replace")
    problems = []
    if rc != 0:
        problems.append(f"exit code {rc}, expected 0")
    san = sanitizer_problem(text)
    if san:
        problems.append(san)
    stdout = out.decode("utf-8", "replace")
    if stdout_re and not re.search(stdout_re, stdout, re.M):
        problems.append(f"stdout does not match /{stdout_re}/")
    if stdout_not_re and re.search(stdout_not_re, stdout, re.M):
        problems.append(f"stdout matches /{stdout_not_re}/")
    if problems:
        return [f"{name}: " + "; ".join(problems) + f"; stdout={show(out, 300)} stderr={show(err)}"], out
    return [], out


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------
CLEAN_GGUF = os.path.join(WORK, "clean.gguf")
CLEAN_HF = os.path.join(WORK, "clean-hf")
CLEAN_SHARDED = os.path.join(WORK, "clean-hf-sharded")
CASES_DIR = os.path.join(WORK, "cases")


def models_stamp(common):
    """Hash of what the clean models depend on: the maker's sources, its arguments and the
    tokenizer files. Models are rebuilt only when it changes."""
    h = hashlib.sha256(json.dumps(common).encode())
    tool_dir = os.path.join(SRC, "tools")
    for root, _, files in sorted(os.walk(os.path.join(tool_dir, "testmodel"))):
        for f in sorted(files):
            if f.endswith(".py"):
                h.update(f.encode() + read(os.path.join(root, f)))
    h.update(read(MAKER))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        st = os.stat(os.path.join(TOKENIZER, f))
        h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def make_models():
    common = ["--config", "tiny", "--dtype", "f32", "--tokenizer", TOKENIZER, "--seed", "1"]
    stamp_path = os.path.join(WORK, "models.stamp")
    stamp = models_stamp(common)
    if os.path.isfile(stamp_path) and read(stamp_path).decode() == stamp and \
            os.path.isfile(CLEAN_GGUF) and os.path.isdir(CLEAN_SHARDED):
        return False
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    procs = [subprocess.Popen([sys.executable, MAKER] + common + ["--format", fmt, "--out", out],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for fmt, out in (("gguf", CLEAN_GGUF), ("hf", CLEAN_HF))]
    for p in procs:
        output, _ = p.communicate()
        if p.returncode != 0:
            sys.exit("model maker failed:\n" + output.decode("utf-8", "replace"))
    # A two-shard copy of the HF model with model.safetensors.index.json, as save_pretrained writes.
    shutil.rmtree(CLEAN_SHARDED, ignore_errors=True)
    os.makedirs(CLEAN_SHARDED)
    for f in os.listdir(CLEAN_HF):
        if f != "model.safetensors":
            shutil.copyfile(os.path.join(CLEAN_HF, f), os.path.join(CLEAN_SHARDED, f))
    with open(os.path.join(CLEAN_HF, "model.safetensors"), "rb") as f:
        header, buffer = st_split(f.read())
    names = [n for n in header if n != "__metadata__"]
    names.sort(key=lambda n: header[n]["data_offsets"][0])
    half = len(names) // 2
    weight_map = {}
    for k, part in enumerate((names[:half], names[half:]), start=1):
        fname = f"model-{k:05d}-of-00002.safetensors"
        shard_header, chunks, off = {"__metadata__": {"format": "pt"}}, [], 0
        for n in part:
            b, e = header[n]["data_offsets"]
            shard_header[n] = dict(header[n], data_offsets=[off, off + e - b])
            chunks.append(buffer[b:e])
            off += e - b
            weight_map[n] = fname
        with open(os.path.join(CLEAN_SHARDED, fname), "wb") as f:
            f.write(st_join(shard_header, b"".join(chunks)))
    with open(os.path.join(CLEAN_SHARDED, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": len(buffer)}, "weight_map": weight_map}, f, indent=2)
    write(stamp_path, stamp.encode())
    return True


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def hf_copy(name, skip=()):
    """A fresh case directory linking (or copying) every file of the clean HF model except `skip`."""
    d = os.path.join(CASES_DIR, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for f in os.listdir(CLEAN_HF):
        if f in skip:
            continue
        try:
            os.link(os.path.join(CLEAN_HF, f), os.path.join(d, f))
        except OSError:
            shutil.copyfile(os.path.join(CLEAN_HF, f), os.path.join(d, f))
    return d


# --------------------------------------------------------------------------------------------
# Cases. Each returns a list of problems; an empty list passes.
# --------------------------------------------------------------------------------------------
ALL = ("info", "generate")
WITH_TOK = ("info", "generate", "tokenize")


def fails(path, keywords, cmds=ALL, names=None):
    names = names or [path, os.path.basename(path.rstrip("/"))]
    problems = []
    for cmd in cmds:
        problems += expect_error(cmd, path, names, keywords)
    return problems


class GgufCases:
    def __init__(self):
        self.clean = read(CLEAN_GGUF)
        self.layout = GgufLayout(self.clean)

    def path(self, name):
        return os.path.join(CASES_DIR, name + ".gguf")

    def patched(self, name, patches):
        """Copy of the clean file with (position, bytes) patches applied."""
        data = bytearray(self.clean)
        for pos, b in patches:
            data[pos:pos + len(b)] = b
        return write(self.path(name), bytes(data))

    def cases(self):
        L = self.layout
        c = {}

        def truncated(name, size, keywords):
            c[name] = lambda: fails(write(self.path(name), self.clean[:size]), keywords)

        c["gguf-bad-magic"] = lambda: fails(self.patched("gguf-bad-magic", [(0, b"GGUX")]),
                                            ["magic", "GGUF"], WITH_TOK)
        c["gguf-bad-version"] = lambda: fails(self.patched("gguf-bad-version", [(4, struct.pack("<I", 7))]),
                                              ["version", "7"])
        truncated("gguf-empty-file", 0, ["truncated"])
        truncated("gguf-truncated-header", 10, ["truncated"])
        kv_name = L.kv("general.name")
        truncated("gguf-truncated-metadata-key", kv_name["start"] + 5, ["truncated"])
        tokens = L.kv("tokenizer.ggml.tokens")
        truncated("gguf-truncated-metadata-array", tokens["value_pos"] + 5000, ["truncated"])
        truncated("gguf-truncated-tensor-infos", L.infos[len(L.infos) // 2]["start"] + 3, ["truncated"])
        truncated("gguf-truncated-last-tensor-info", L.infos[-1]["offset_pos"] + 2, ["truncated"])
        truncated("gguf-truncated-at-data-start", L.data_start, ["past end of file"])
        truncated("gguf-truncated-data", L.data_start + (len(self.clean) - L.data_start) // 2,
                  ["past end of file"])
        truncated("gguf-truncated-last-byte", len(self.clean) - 1, ["past end of file"])

        last = L.infos[-1]
        c["gguf-offset-past-eof"] = lambda: fails(self.patched("gguf-offset-past-eof", [
            (last["offset_pos"], struct.pack("<Q", last["offset"] + (1 << 20)))]),
            [last["name"], "past end of file"])
        big = L.info("blk.1.ffn_down.weight")
        c["gguf-dims-past-eof"] = lambda: fails(self.patched("gguf-dims-past-eof", [
            (big["dims_pos"] + 8, struct.pack("<Q", 1 << 40))]),
            ["blk.1.ffn_down.weight", "past end of file"])
        c["gguf-dims-overflow"] = lambda: fails(self.patched("gguf-dims-overflow", [
            (big["dims_pos"], struct.pack("<QQ", 1 << 40, 1 << 40))]),
            ["blk.1.ffn_down.weight", "overflow"])
        first = L.infos[0]
        c["gguf-unknown-tensor-type"] = lambda: fails(self.patched("gguf-unknown-tensor-type", [
            (first["type_pos"], struct.pack("<I", 999))]), [first["name"], "type", "999"])
        up = L.info("blk.0.ffn_up.weight")
        c["gguf-missing-tensor"] = lambda: fails(self.patched("gguf-missing-tensor", [
            (up["name_pos"], b"blk.0.ffn_uX.weight")]), ["missing tensor", "blk.0.ffn_up.weight"])
        emb = L.kv("qwen3.embedding_length")
        c["gguf-shape-mismatch-embedding-length"] = lambda: fails(self.patched(
            "gguf-shape-mismatch-embedding-length", [(emb["value_pos"], struct.pack("<I", 96))]),
            ["token_embd.weight", "shape", "expected"])
        ffn = L.kv("qwen3.feed_forward_length")
        c["gguf-shape-mismatch-feed-forward-length"] = lambda: fails(self.patched(
            "gguf-shape-mismatch-feed-forward-length", [(ffn["value_pos"], struct.pack("<I", 256))]),
            ["blk.0.ffn_gate.weight", "shape", "expected"])
        heads = L.kv("qwen3.attention.head_count")
        c["gguf-zero-head-count"] = lambda: fails(self.patched(
            "gguf-zero-head-count", [(heads["value_pos"], struct.pack("<I", 0))]),
            ["head_count", "positive"])
        ctx = L.kv("qwen3.context_length")
        c["gguf-zero-context-length"] = lambda: fails(self.patched(
            "gguf-zero-context-length", [(ctx["value_pos"], struct.pack("<I", 0))]),
            ["context_length", "positive"])
        c["gguf-unknown-value-type"] = lambda: fails(self.patched("gguf-unknown-value-type", [
            (kv_name["value_pos"] - 4, struct.pack("<I", 99))]), ["value type", "99"])
        c["gguf-huge-string-length"] = lambda: fails(self.patched("gguf-huge-string-length", [
            (kv_name["value_pos"], struct.pack("<Q", 1 << 60))]), ["string length"])

        def rebuilt(name, keywords, cmds=ALL, **kw):
            c[name] = lambda: fails(write(self.path(name), L.rebuild(**kw)), keywords, cmds)

        rebuilt("gguf-missing-block-count", ["qwen3.block_count", "missing"],
                drop=lambda k: k == "qwen3.block_count")
        rebuilt("gguf-missing-architecture", ["general.architecture", "missing"],
                drop=lambda k: k == "general.architecture")
        rebuilt("gguf-unsupported-architecture", ["llama", "not supported"],
                replace={"general.architecture": gguf_kv_string("general.architecture", "llama")})
        rebuilt("gguf-architecture-with-control-chars", ["general.architecture", "not supported"],
                replace={"general.architecture": gguf_kv_string("general.architecture", "llama\n\x1b[31mred\r")})
        rebuilt("gguf-wrong-metadata-type", ["qwen3.embedding_length", "type", "string"],
                replace={"qwen3.embedding_length": gguf_kv_string("qwen3.embedding_length", "64")})
        rebuilt("gguf-bad-tokenizer-model", ["tokenizer.ggml.model", "not supported"], WITH_TOK,
                replace={"tokenizer.ggml.model": gguf_kv_string("tokenizer.ggml.model", "llama")})
        rebuilt("gguf-bad-eos-token-id", ["eos", "999999999"], WITH_TOK,
                replace={"tokenizer.ggml.eos_token_id": gguf_kv_uint32("tokenizer.ggml.eos_token_id", 999999999)})
        rebuilt("gguf-huge-bos-token-id", ["bos", "4294967295"], WITH_TOK,
                replace={"tokenizer.ggml.bos_token_id": gguf_kv_uint32("tokenizer.ggml.bos_token_id", 0xFFFFFFFF)})

        def tenth_merge():
            # (offset of the 10th merge's length field, its length in bytes): the merges array
            # value holds an element type (4 bytes) and a count (8), then length-prefixed strings.
            pos = L.kv("tokenizer.ggml.merges")["value_pos"] + 12
            for _ in range(9):
                (n,) = struct.unpack_from("<Q", self.clean, pos)
                pos += 8 + n
            (n,) = struct.unpack_from("<Q", self.clean, pos)
            return pos, n

        def bad_merge():
            # Rewrite the 10th merge (same length) so that it has no space and a line break.
            pos, n = tenth_merge()
            bad = (b"x\n" * n)[:n]
            return fails(self.patched("gguf-bad-merge", [(pos + 8, bad)]),
                         ["tokenizer.ggml.merges", "9"], WITH_TOK)
        c["gguf-bad-merge"] = bad_merge

        def merge_of_missing_token():
            # The 10th merge rewritten (same length) to "\x7f...\x7f \x7f": well formed, but a
            # raw DEL byte is no byte-level BPE token (GPT-2's byte-to-unicode map sends 0x7f to
            # U+0121), so the merge uses tokens missing from the vocabulary. info must refuse the
            # model as serve, generate and tokenize do (it used to exit 0).
            pos, n = tenth_merge()
            assert n >= 3
            bad = b"\x7f" * (n - 2) + b" \x7f"
            return fails(self.patched("gguf-merge-missing-token", [(pos + 8, bad)]),
                         ["merge 9", "missing from the vocabulary"], WITH_TOK)
        c["gguf-merge-missing-token"] = merge_of_missing_token

        def alignment_one():
            # Valid: general.alignment 1 and a data section starting at an odd offset, so every
            # f32 tensor is misaligned in memory. Must load and run (no UBSan misaligned loads).
            data = L.rebuild(add=[gguf_kv_uint32("general.alignment", 1)], alignment=1)
            if GgufLayout(data).data_start % 4 == 0:  # add a 1-byte name to make it odd
                data = L.rebuild(add=[gguf_kv_uint32("general.alignment", 1),
                                      gguf_kv_string("general.x", "x")], alignment=1)
            assert GgufLayout(data).data_start % 2 == 1
            path = write(self.path("gguf-alignment-1-unaligned-data"), data)
            problems, _ = expect_ok(command_args("info", path), r"^tokenizer:\s+\S")
            return problems + expect_ok(command_args("generate", path))[0]
        c["gguf-alignment-1-unaligned-data"] = alignment_one

        def no_tokenizer():
            path = write(self.path("gguf-no-tokenizer"),
                         L.rebuild(drop=lambda k: k.startswith("tokenizer.ggml.")))
            problems, _ = expect_ok(command_args("info", path), r"^tokenizer:\s+none\s*$")
            return problems + fails(path, ["tokenizer"], ("generate", "tokenize"))
        c["gguf-no-tokenizer"] = no_tokenizer

        missing = os.path.join(CASES_DIR, "does-not-exist.gguf")
        c["nonexistent-path"] = lambda: fails(missing, ["no such file"], WITH_TOK)

        def empty_dir():
            d = os.path.join(CASES_DIR, "dir-without-config")
            os.makedirs(d, exist_ok=True)
            write(os.path.join(d, "README.md"), b"not a model\n")
            return fails(d, ["config.json"], WITH_TOK)
        c["dir-without-config"] = empty_dir
        return c


class HfCases:
    def __init__(self):
        self.config = json.loads(read(os.path.join(CLEAN_HF, "config.json")))
        self.st_header, self.st_buffer = st_split(read(os.path.join(CLEAN_HF, "model.safetensors")))

    def with_config(self, name, text: bytes, keywords, cmds=ALL):
        d = hf_copy(name, skip=("config.json",))
        p = write(os.path.join(d, "config.json"), text)
        return fails(d, keywords, cmds, names=[p, "config.json"])

    def config_edit(self, name, keywords, **changes):
        cfg = dict(self.config, **changes)
        return self.with_config(name, json.dumps(cfg, indent=2).encode(), keywords)

    def with_st(self, name, data: bytes, keywords, cmds=ALL):
        d = hf_copy(name, skip=("model.safetensors",))
        p = write(os.path.join(d, "model.safetensors"), data)
        return fails(d, keywords, cmds, names=[p, "model.safetensors"])

    def header_edit(self, name, edit, keywords):
        header = json.loads(json.dumps(self.st_header))
        edit(header)
        return self.with_st(name, st_join(header, self.st_buffer), keywords)

    def cases(self):
        c = {}
        c["hf-config-invalid-json"] = lambda: self.with_config(
            "hf-config-invalid-json", b'{"model_type": "qwen3", "hidden_size": 64,,}', ["JSON"])
        c["hf-config-not-object"] = lambda: self.with_config(
            "hf-config-not-object", b'[1, 2, 3]\n', ["object"])
        c["hf-config-binary-garbage"] = lambda: self.with_config(
            "hf-config-binary-garbage", b'{"model_type": "qwen3"\n\x00\x01\xff\xfe\n\x1b[31m', ["JSON"])
        c["hf-config-wrong-type"] = lambda: self.config_edit(
            "hf-config-wrong-type", ["hidden_size", "integer"], hidden_size="64")
        c["hf-config-missing-field"] = lambda: self.with_config(
            "hf-config-missing-field",
            json.dumps({k: v for k, v in self.config.items() if k != "num_hidden_layers"}).encode(),
            ["num_hidden_layers", "missing"])
        c["hf-config-unsupported-model-type"] = lambda: self.config_edit(
            "hf-config-unsupported-model-type", ["model_type", "llama", "not supported"], model_type="llama")
        c["hf-config-model-type-not-string"] = lambda: self.config_edit(
            "hf-config-model-type-not-string", ["model_type", "string"], model_type=3)
        c["hf-config-model-type-control-chars"] = lambda: self.config_edit(
            "hf-config-model-type-control-chars", ["model_type", "not supported"], model_type="llama\nevil\x07")
        c["hf-config-negative-layers"] = lambda: self.config_edit(
            "hf-config-negative-layers", ["num_hidden_layers", "positive"], num_hidden_layers=-2)
        c["hf-config-huge-head-dim"] = lambda: self.config_edit(
            "hf-config-huge-head-dim", ["head_dim"], head_dim=1 << 62)
        c["hf-config-huge-vocab"] = lambda: self.config_edit(
            "hf-config-huge-vocab", ["vocab_size"], vocab_size=(1 << 63) - 1)
        c["hf-config-negative-context"] = lambda: self.config_edit(
            "hf-config-negative-context", ["max_position_embeddings", "positive"], max_position_embeddings=-5)

        def shape_mismatch_config():
            d = hf_copy("hf-shape-mismatch-config", skip=("config.json",))
            write(os.path.join(d, "config.json"), json.dumps(dict(self.config, intermediate_size=256)).encode())
            return fails(d, ["model.layers.0.mlp.gate_proj.weight", "shape", "expected"])
        c["hf-shape-mismatch-config"] = shape_mismatch_config

        up = "model.layers.0.mlp.up_proj.weight"

        def transpose(h):
            h[up]["shape"] = list(reversed(h[up]["shape"]))
        c["hf-shape-mismatch-tensor"] = lambda: fails(
            self._st_dir("hf-shape-mismatch-tensor", transpose), [up, "shape", "expected"])

        def size_mismatch(h):
            h[up]["shape"] = [h[up]["shape"][0], h[up]["shape"][1] * 2]
        c["hf-shape-size-mismatch"] = lambda: self.header_edit(
            "hf-shape-size-mismatch", size_mismatch, [up, "shape"])

        def bad_header_json():
            n = struct.unpack_from("<Q", self._st_bytes(), 0)[0]
            data = bytearray(self._st_bytes())
            data[8 + n // 2:8 + n // 2 + 6] = b'\n"}]{\x00'
            return self.with_st("hf-st-malformed-header", bytes(data), ["JSON", "header"])
        c["hf-st-malformed-header"] = bad_header_json

        def header_too_long():
            data = bytearray(self._st_bytes())
            data[0:8] = struct.pack("<Q", len(data) + 100)
            return self.with_st("hf-st-header-length-past-eof", bytes(data), ["header length", "exceeds"])
        c["hf-st-header-length-past-eof"] = header_too_long
        c["hf-st-tiny-file"] = lambda: self.with_st("hf-st-tiny-file", b"\x10\x00\x00", ["truncated"])

        def offsets_past_end(h):
            name = max((n for n in h if n != "__metadata__"), key=lambda n: h[n]["data_offsets"][1])
            b, e = h[name]["data_offsets"]
            h[name]["data_offsets"] = [b + 4096, e + 4096]
        c["hf-st-offsets-past-eof"] = lambda: self.header_edit(
            "hf-st-offsets-past-eof", offsets_past_end, ["data_offsets", "past the end"])
        c["hf-st-truncated-data"] = lambda: self.with_st(
            "hf-st-truncated-data", self._st_bytes()[:-4096], ["data_offsets", "past the end"])

        def unsupported_dtype(h):
            h[up]["dtype"] = "I64"
            h[up]["shape"] = [h[up]["shape"][0], h[up]["shape"][1] // 2]
        c["hf-st-unsupported-dtype"] = lambda: self.header_edit(
            "hf-st-unsupported-dtype", unsupported_dtype, [up, "dtype", "I64"])

        def drop(h):
            del h[up]
        c["hf-st-missing-tensor"] = lambda: fails(
            self._st_dir("hf-st-missing-tensor", drop), ["missing tensor", up])

        def unaligned_data():
            # Valid: a header padded to 8k+1 bytes, so the f32 data is misaligned in memory.
            js = json.dumps(self.st_header, separators=(",", ":")).encode("utf-8")
            js += b" " * ((-(8 + len(js))) % 8 + 1)
            d = hf_copy("hf-st-unaligned-data", skip=("model.safetensors",))
            write(os.path.join(d, "model.safetensors"), struct.pack("<Q", len(js)) + js + self.st_buffer)
            problems, _ = expect_ok(command_args("info", d), r"^tokenizer:\s+\S")
            return problems + expect_ok(command_args("generate", d))[0]
        c["hf-st-unaligned-data"] = unaligned_data

        c["hf-no-weights"] = lambda: fails(hf_copy("hf-no-weights", skip=("model.safetensors",)),
                                           ["model.safetensors"])

        def no_tokenizer():
            d = hf_copy("hf-no-tokenizer-json", skip=("tokenizer.json",))
            problems, _ = expect_ok(command_args("info", d), r"^tokenizer:\s+none\s*$")
            return problems + fails(d, ["tokenizer.json"], ("generate", "tokenize"))
        c["hf-no-tokenizer-json"] = no_tokenizer

        def bad_tokenizer_json():
            d = hf_copy("hf-tokenizer-invalid-json", skip=("tokenizer.json",))
            p = write(os.path.join(d, "tokenizer.json"), b'{"model": {"type": "BPE", "vocab": {')
            return fails(d, ["JSON"], WITH_TOK, names=[p, "tokenizer.json"])
        c["hf-tokenizer-invalid-json"] = bad_tokenizer_json

        def bad_tokenizer_config():
            d = hf_copy("hf-tokenizer-config-invalid-json", skip=("tokenizer_config.json",))
            p = write(os.path.join(d, "tokenizer_config.json"), b'{"chat_template": "x\n')
            return fails(d, ["JSON"], ALL, names=[p, "tokenizer_config.json"])
        c["hf-tokenizer-config-invalid-json"] = bad_tokenizer_config

        def bad_chat_template():
            d = hf_copy("hf-tokenizer-config-bad-chat-template", skip=("tokenizer_config.json",))
            p = write(os.path.join(d, "tokenizer_config.json"),
                      b'{"chat_template": [{"name": "default", "template": 5}]}')
            return fails(d, ["chat_template"], ALL, names=[p, "tokenizer_config.json"])
        c["hf-tokenizer-config-bad-chat-template"] = bad_chat_template

        def vocab_smaller_than_tokenizer():
            # Consistent weights and config.json with 1000 embedding rows, but the full 151669-token
            # tokenizer.json: "Hello" is token 9707, which the model has no row for.
            rows = 1000
            emb = "model.embed_tokens.weight"
            header = json.loads(json.dumps(self.st_header))
            names = sorted((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"][0])
            chunks, off = [], 0
            for n in names:
                b, e = header[n]["data_offsets"]
                data = self.st_buffer[b:e]
                if n == emb:
                    data = data[:rows * header[n]["shape"][1] * 4]
                    header[n]["shape"] = [rows, header[n]["shape"][1]]
                header[n]["data_offsets"] = [off, off + len(data)]
                chunks.append(data)
                off += len(data)
            d = hf_copy("hf-vocab-smaller-than-tokenizer", skip=("model.safetensors", "config.json"))
            write(os.path.join(d, "model.safetensors"), st_join(header, b"".join(chunks)))
            write(os.path.join(d, "config.json"), json.dumps(dict(self.config, vocab_size=rows)).encode())
            problems, _ = expect_ok(command_args("info", d), r"vocab_size\s+1000\b")
            return problems + fails(d, ["9707", "vocabulary"], ("generate",))
        c["hf-vocab-smaller-than-tokenizer"] = vocab_smaller_than_tokenizer

        def missing_shard():
            d = os.path.join(CASES_DIR, "hf-sharded-missing-shard")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(CLEAN_SHARDED, d, copy_function=_link_or_copy)
            os.remove(os.path.join(d, "model-00002-of-00002.safetensors"))
            return fails(d, ["model-00002-of-00002.safetensors", "missing"],
                         names=["model-00002-of-00002.safetensors"])
        c["hf-sharded-missing-shard"] = missing_shard

        def bad_index():
            d = os.path.join(CASES_DIR, "hf-sharded-invalid-index")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(CLEAN_SHARDED, d, copy_function=_link_or_copy)
            p = os.path.join(d, "model.safetensors.index.json")
            os.remove(p)
            write(p, b'{"weight_map": {"a": "model-00001-of-00002.safetensors"')
            return fails(d, ["JSON"], names=[p, "model.safetensors.index.json"])
        c["hf-sharded-invalid-index"] = bad_index
        return c

    def _st_bytes(self):
        return st_join(self.st_header, self.st_buffer)

    def _st_dir(self, name, edit):
        header = json.loads(json.dumps(self.st_header))
        edit(header)
        d = hf_copy(name, skip=("model.safetensors",))
        write(os.path.join(d, "model.safetensors"), st_join(header, self.st_buffer))
        return d


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def clean_cases():
    c = {}
    for label, path in (("gguf", CLEAN_GGUF), ("hf", CLEAN_HF), ("hf-sharded", CLEAN_SHARDED)):
        def run(path=path):
            problems, _ = expect_ok(command_args("info", path), r"^tokenizer:\s+\S", r"^tokenizer:\s+none")
            p, _ = expect_ok(command_args("generate", path))
            return problems + p
        c[f"clean-{label}"] = run

    def json_output(path):
        problems, out = expect_ok(["generate", "-m", path, "-p", PROMPT, "--max-tokens", "2", "--seed", "3",
                                   "--json"])
        if problems:
            return problems
        try:
            obj = json.loads(out)
        except ValueError as e:
            return [f"generate --json: stdout is not JSON ({e}): {show(out)}"]
        if not isinstance(obj, dict):
            return ["generate --json: not an object"]
        missing = [k for k in ("text", "token_ids", "prompt_token_ids", "finish_reason", "timings")
                   if k not in obj]
        if missing:
            return [f"generate --json: missing fields {missing}: {show(out)}"]
        if not isinstance(obj["text"], str) or not isinstance(obj["finish_reason"], str) or \
                not isinstance(obj["timings"], dict):
            return [f"generate --json: wrong field types: {show(out)}"]
        ids = obj["token_ids"]
        if not (isinstance(ids, list) and 1 <= len(ids) <= 2 and all(isinstance(i, int) for i in ids)):
            return [f"generate --json: token_ids {ids!r} is not 1-2 integer ids"]
        if not (isinstance(obj["prompt_token_ids"], list) and obj["prompt_token_ids"]):
            return [f"generate --json: bad prompt_token_ids {obj['prompt_token_ids']!r}"]
        return []
    c["clean-gguf-generate-json"] = lambda: json_output(CLEAN_GGUF)
    c["clean-hf-generate-json"] = lambda: json_output(CLEAN_HF)

    def round_trip(path):
        enc = subprocess.Popen([QS_BIN, "tokenize", "-m", path, "--text", ROUND_TRIP_TEXT],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        rc, out, err, _ = run_cli(["tokenize", "-m", path, "--decode", "--file", "/dev/stdin"],
                                  stdin=enc.stdout.read())
        enc_err = enc.stderr.read()
        enc.wait()
        problems = []
        if enc.returncode != 0 or sanitizer_problem(enc_err.decode("utf-8", "replace")):
            problems.append(f"tokenize --text: exit code {enc.returncode}; stderr={show(enc_err)}")
        if rc != 0 or sanitizer_problem(err.decode("utf-8", "replace")):
            problems.append(f"tokenize --decode: exit code {rc}; stderr={show(err)}")
        if out != ROUND_TRIP_TEXT.encode("utf-8"):
            problems.append(f"round trip gave {show(out)}, expected {ROUND_TRIP_TEXT!r}")
        return problems
    def padding_ids(path):
        # Qwen's tokenizer has 151669 ids but the embedding 151936 rows: a model can sample a
        # padding row. Near-uniform sampling over 200 tokens hits one with probability ~30%; try
        # seeds until one did (the ids are in the JSON), so the case does test it.
        n_tok = None
        for seed in range(1, 9):
            problems, out = expect_ok(["generate", "-m", path, "-p", PROMPT, "--max-tokens", "200",
                                       "--temperature", "1000", "--top-k", "0", "--top-p", "1",
                                       "--seed", str(seed), "--json"])
            if problems:
                return [f"seed {seed}: " + p for p in problems]
            if n_tok is None:
                with open(os.path.join(path, "tokenizer.json"), encoding="utf-8") as f:
                    tok = json.load(f)
                n_tok = 1 + max(list(tok["model"]["vocab"].values()) + [a["id"] for a in tok["added_tokens"]])
            if any(i >= n_tok for i in json.loads(out)["token_ids"]):
                return []
        print(f"note: clean-hf-generate-padding-ids sampled no id >= {n_tok} in 8 seeds", flush=True)
        return []
    c["clean-hf-generate-padding-ids"] = lambda: padding_ids(CLEAN_HF)

    def decode_bad_id():
        huge = (1 << 32) + 9707  # wraps to 9707 ("Hello") as int32
        return expect_error("tokenize --decode", CLEAN_GGUF, [str(huge)], ["out of range"],
                            ["tokenize", "-m", CLEAN_GGUF, "--decode", "--text", f"[{huge}]"])
    c["tokenize-decode-id-out-of-range"] = decode_bad_id

    # quantize checks its output path before the (long) quantization, not when it opens the file.
    c["quantize-output-is-a-directory"] = lambda: expect_error(
        "quantize", CASES_DIR, [CASES_DIR], ["is a directory"], ["quantize", CLEAN_GGUF, CASES_DIR, "--type", "q8_0"])
    missing_dir = os.path.join(CASES_DIR, "no-such-dir", "out.gguf")
    # Never renamed over a device file (as root this replaced /dev/null with the model).
    c["quantize-output-is-a-device"] = lambda: expect_error(
        "quantize", "/dev/null", ["/dev/null"], ["not a regular file"], ["quantize", CLEAN_GGUF, "/dev/null", "--type", "q8_0"])
    c["quantize-output-path-empty"] = lambda: expect_error(
        "quantize", "", ["output path"], ["empty"], ["quantize", CLEAN_GGUF, "", "--type", "q8_0"])
    c["quantize-output-directory-missing"] = lambda: expect_error(
        "quantize", missing_dir, [missing_dir], ["does not exist"], ["quantize", CLEAN_GGUF, missing_dir, "--type", "q8_0"])

    def seed_out_of_range():
        # --seed is a uint64 (0..2^64-1): -1 and 2^64 are usage errors, not wrapped or clamped.
        problems = []
        for seed in ("-1", str(1 << 64)):
            rc, _, err, _ = run_cli(["generate", "-m", CLEAN_GGUF, "-p", PROMPT, "--max-tokens", "1", "--seed", seed])
            text = err.decode("utf-8", "replace")
            if rc in (0, None) or rc < 0 or "--seed" not in text or "18446744073709551615" not in text:
                problems.append(f"--seed {seed}: exit code {rc}, stderr={show(err)}")
        return problems
    c["generate-seed-out-of-range"] = seed_out_of_range

    c["clean-gguf-tokenize-round-trip"] = lambda: round_trip(CLEAN_GGUF)
    c["clean-hf-tokenize-round-trip"] = lambda: round_trip(CLEAN_HF)
    return c


def selected(name, patterns):
    if not patterns:
        return True
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)


def main():
    if not QS_BIN or not os.access(QS_BIN, os.X_OK):
        print(f"QS_BIN={QS_BIN!r} is not an executable", file=sys.stderr)
        return 1
    if not os.path.isfile(os.path.join(TOKENIZER, "tokenizer.json")):
        print(f"{TOKENIZER}/tokenizer.json not found (run tools/fetch-tokenizer.sh)", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    os.makedirs(WORK, exist_ok=True)
    shutil.rmtree(CASES_DIR, ignore_errors=True)
    os.makedirs(CASES_DIR)
    made = make_models()
    print(f"{'made' if made else 'reused'} models in {time.monotonic() - t0:.1f} s ({QS_BIN})", flush=True)

    cases = {}
    cases.update(clean_cases())
    cases.update(GgufCases().cases())
    cases.update(HfCases().cases())
    patterns = [p.strip() for p in os.environ.get("QS_BAD_INPUT_CASES", "").split(",") if p.strip()]
    names = [n for n in cases if selected(n, patterns)]

    def run_case(name):
        t = time.monotonic()
        try:
            problems = cases[name]()
        except Exception as e:  # a harness bug must fail the test, not hide a case
            problems = [f"harness error: {type(e).__name__}: {e}"]
        return name, problems, time.monotonic() - t

    passed = failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, JOBS)) as pool:
        for name, problems, dt in pool.map(run_case, names):
            if problems:
                failed += 1
                print(f"FAIL {name} ({dt:.1f} s)")
                for p in problems:
                    print(f"     {p}")
            else:
                passed += 1
                print(f"ok   {name} ({dt:.1f} s)")
            sys.stdout.flush()
    print(f"total {time.monotonic() - t0:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
