#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/ (committed; rerun
after changing an input layout). Every seed is small (< 16 KiB) and is a real instance of its
format: GGUF files from the test-model writer (tools/testmodel/gguf_out.py), safetensors files and
indexes from tools/testmodel/st_out.py, a cut-down Qwen3 tokenizer.json, OpenAI request bodies,
chat templates, SSE streams and HTTP heads. Inputs for FuzzedDataProvider targets are laid out as
the target reads them (integers and bools are taken from the end, strings from the front with
"\\" + another byte ending a string).

Usage: tests/fuzz/make_seeds.py [--tokenizer DIR]   (default .cache/tokenizer-qwen3)
"""
import argparse
import hashlib
import json
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools"))
from testmodel import gguf_out, st_out  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")


def put(target: str, data: bytes) -> None:
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fdp_string(s: bytes) -> bytes:
    """FuzzedDataProvider::ConsumeRandomLengthString encoding: '\\' doubled, then '\\' + 'x' ends."""
    return s.replace(b"\\", b"\\\\") + b"\\x"


def tensor(name, shape, ggml_type, nbytes):
    data = bytes((i * 37 + 11) % 256 for i in range(nbytes))
    return gguf_out.GgufTensor(name, shape, ggml_type, nbytes, lambda: [data])


def gguf_bytes(metadata, tensors) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.gguf")
        gguf_out.write_gguf(path, metadata, tensors)
        return open(path, "rb").read()


def gguf_seeds(tok_dir):
    arch = [("general.architecture", "string", "qwen3"), ("qwen3.block_count", "uint32", 1),
            ("qwen3.context_length", "uint32", 64), ("qwen3.embedding_length", "uint32", 32),
            ("qwen3.feed_forward_length", "uint32", 64), ("qwen3.attention.head_count", "uint32", 2),
            ("qwen3.attention.head_count_kv", "uint32", 1), ("qwen3.attention.key_length", "uint32", 16),
            ("qwen3.rope.freq_base", "float32", 1000000.0),
            ("qwen3.attention.layer_norm_rms_epsilon", "float32", 1e-6)]
    # F32, F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, BF16 (ggml ids): one small tensor of each.
    types = {0: (32, 4 * 32), 1: (32, 2 * 32), 2: (32, 18), 8: (32, 34), 12: (256, 144), 13: (256, 176),
             14: (256, 210), 30: (32, 2 * 32)}
    tensors = [tensor(f"t{tid}.weight", (1, n), tid, nb) for tid, (n, nb) in types.items()]
    put("gguf_reader_fuzz", gguf_bytes(arch, tensors))
    put("gguf_reader_fuzz", gguf_bytes([("general.alignment", "uint32", 64)] + arch[:3], tensors[:2]))
    put("gguf_reader_fuzz", gguf_bytes([("general.name", "string", "x"), ("a.bool", "bool", True)], []))
    # A tokenizer vocabulary: the first 300 Qwen3 tokens, their merges, two control tokens.
    tok = json.load(open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8"))
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])[:300]
    names = [t for t, _ in vocab] + ["<|im_start|>", "<|im_end|>"]
    have = set(names)
    merges = []
    for m in tok["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a in have and b in have and a + b in have:
            merges.append(f"{a} {b}")
    types_arr = [1] * 300 + [3, 3]
    put("gguf_reader_fuzz", gguf_bytes(
        [("tokenizer.ggml.model", "string", "gpt2"), ("tokenizer.ggml.tokens", "string_array", names),
         ("tokenizer.ggml.merges", "string_array", merges), ("tokenizer.ggml.token_type", "int32_array", types_arr),
         ("tokenizer.ggml.eos_token_id", "uint32", 301)], []))


def st_file(tensors) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.safetensors")
        st_out._write_file(path, tensors, None)
        return open(path, "rb").read()


def st_tensor(name, shape, dtype):
    size = {"f32": 4, "f16": 2, "bf16": 2}[dtype]
    n = 1
    for d in shape:
        n *= d
    data = bytes((i * 13 + 5) % 256 for i in range(n * size))
    return st_out.StTensor(name, shape, dtype, len(data), lambda: [data])


def safetensors_seeds():
    one = st_file([st_tensor("a.weight", (2, 4), "f32"), st_tensor("b.weight", (3,), "bf16"),
                   st_tensor("c.weight", (2, 2, 2), "f16"), st_tensor("empty", (0, 4), "f32")])
    put("safetensors_reader_fuzz", one + b"\x00")  # last byte: single-file mode
    shard_a = st_file([st_tensor("a.weight", (2, 4), "f32")])
    shard_b = st_file([st_tensor("b.weight", (4,), "bf16"), st_tensor("c.weight", (1, 2), "f16")])
    index = json.dumps({"metadata": {"total_size": 52}, "weight_map": {
        "a.weight": "a.safetensors", "b.weight": "b.safetensors", "c.weight": "b.safetensors"}}).encode()
    put("safetensors_reader_fuzz", fdp_string(index) + fdp_string(shard_a) + shard_b + b"\x01")


def tokenizer_json_seeds(tok_dir):
    tok = json.load(open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8"))
    vocab = dict(sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])[:400])
    merges = []
    for m in tok["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a in vocab and b in vocab and a + b in vocab:
            merges.append([a, b])
    small = dict(tok)
    small["model"] = dict(tok["model"], vocab=vocab, merges=merges)
    small["added_tokens"] = [dict(a, id=400 + i) for i, a in enumerate(tok["added_tokens"][:4])]
    put("tokenizer_json_fuzz", json.dumps(small, ensure_ascii=False).encode())
    small["model"] = dict(small["model"], merges=[" ".join(m) for m in merges[:50]])
    small["normalizer"] = None
    put("tokenizer_json_fuzz", json.dumps(small, ensure_ascii=False, indent=1).encode())


def roundtrip_seeds():
    texts = ["Hello, world!", "  leading spaces\n\n\ttabs\r\n", "caf\u00e9 cafe\u0301 \u212b \uac00\u11a8",
             "<|im_start|>user\nhi<|im_end|>\n<think>\u0338</think>", "\U0001f600\U0001f469\u200d\U0001f4bb 123 4567",
             "\u4f60\u597d\uff0c\u4e16\u754c", "don't I'LL we've", "x" * 300]
    for t in texts:
        put("tokenizer_roundtrip_fuzz", t.encode() + b"\x01")
    put("tokenizer_roundtrip_fuzz", b"\xff\xfe\xc3(\xe2\x82\xf0\x9f\x98" + b"\x01")
    put("tokenizer_roundtrip_fuzz", bytes(range(256)) + b"\x00")  # ids mode


def request_seeds():
    bodies = [
        {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16},
        {"model": "qwenserve", "messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
         "temperature": 0.7, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "seed": 42, "n": 2,
         "stop": ["\n\n", "END"], "stream": True, "stream_options": {"include_usage": True},
         "logprobs": True, "top_logprobs": 3, "logit_bias": {"100": -100, "7": 5}, "timeout": 30},
        {"messages": [{"role": "user", "content": "weather?"},
                      {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                      {"role": "tool", "content": "sunny", "tool_call_id": "c1"}],
         "tools": [{"type": "function", "function": {"name": "get_weather", "description": "w",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
         "tool_choice": "auto", "chat_template_kwargs": {"enable_thinking": False}},
        {"messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"},
                      {"role": "assistant", "content": "<think>\nr\n</think>\n\na"}, {"role": "user", "content": "again"}],
         "max_completion_tokens": 8, "presence_penalty": 1.5, "frequency_penalty": -1, "repetition_penalty": 1.1},
        {"prompt": "def fib(n):", "max_tokens": 32, "echo": True, "logprobs": 2},
        {"prompt": [9707, 11, 1879], "max_tokens": 4},
        {"prompt": ["only one string"], "stop": "x"},
    ]
    for b in bodies:
        put("openai_request_fuzz", json.dumps(b, ensure_ascii=False).encode())
    put("openai_request_fuzz", b"[" * 200 + b"]" * 200)


def responses_seeds():
    """POST /v1/responses bodies (OpenAI API reference, "Responses")."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    bodies = [
        {"model": "qwenserve", "input": "Hello", "max_output_tokens": 16},
        {"instructions": "Be brief.", "input": [{"role": "developer", "content": "d"},
                                               {"role": "user", "content": [{"type": "input_text", "text": "Hi "},
                                                                            {"type": "input_text", "text": "there"}]},
                                               {"type": "message", "role": "assistant",
                                                "content": [{"type": "output_text", "text": "Hello"}]}],
         "temperature": 0.5, "top_p": 0.9, "seed": 7, "stream": True, "store": False, "metadata": {"k": "v"}},
        {"input": [{"role": "user", "content": "weather in Paris?"},
                   {"type": "reasoning", "summary": []},
                   {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
                   {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{\"city\": \"Rome\"}"},
                   {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                   {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "rain"}]}],
         "tools": [{"type": "function", "name": "get_weather", "description": "w", "parameters": schema, "strict": True}],
         "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": False},
        {"input": "JSON please", "text": {"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}},
         "tool_choice": "none"},
        {"input": "an object", "text": {"format": {"type": "json_object"}}, "tools": [], "tool_choice": "required"},
        {"input": "x", "previous_response_id": "resp_1"},
        {"input": [{"type": "web_search_call"}], "background": True},
    ]
    for b in bodies:
        put("responses_request_fuzz", json.dumps(b, ensure_ascii=False).encode())
    put("responses_request_fuzz", b'{"input": ' + b"[" * 130 + b"]" * 130 + b"}")


def messages_seeds():
    """POST /v1/messages bodies (Anthropic API reference, "Messages")."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    bodies = [
        {"model": "qwenserve", "max_tokens": 16, "messages": [{"role": "user", "content": "Hello"}]},
        {"max_tokens": 64, "system": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
         "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                      {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                                        {"type": "text", "text": "Hello"}]},
                      {"role": "user", "content": "again"}],
         "temperature": 0.5, "top_p": 0.9, "top_k": 20, "stop_sequences": ["\n\n", "END"], "stream": True,
         "metadata": {"user_id": "u"}},
        {"max_tokens": 32, "messages": [
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                                              {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
                                              {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {"city": "Rome"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                                         {"type": "tool_result", "tool_use_id": "t2",
                                          "content": [{"type": "text", "text": "rain"}]},
                                         {"type": "text", "text": "and?"}]}],
         "tools": [{"name": "get_weather", "description": "w", "input_schema": schema}],
         "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}},
        {"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "custom", "name": "f",
                                                                                    "input_schema": {"type": "object"}}],
         "tool_choice": {"type": "any"}},
        {"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
        {"messages": [{"role": "user", "content": "no max_tokens"}]},
        {"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web_search_20250305", "name": "s"}]},
    ]
    for b in bodies:
        put("messages_request_fuzz", json.dumps(b, ensure_ascii=False).encode())
    put("messages_request_fuzz", b'{"max_tokens": 1, "messages": ' + b"[" * 130 + b"]" * 130 + b"}")


def kwargs_seeds():
    """chat_template_kwargs objects (vLLM), as chat_template_kwargs_fuzz reads them: the JSON alone."""
    kwargs = [
        {"enable_thinking": False}, {"enable_thinking": True}, {"enable_thinking": 0}, {"enable_thinking": "false"},
        {"enable_thinking": None}, {"custom_flag": [1, 2.5, {"a": None}], "other": "x"},
        {"tools": [{"type": "function", "function": {"name": "f"}}]}, {"messages": 1, "add_generation_prompt": False},
        {"namespace": 3, "raise_exception": "x", "range": None}, {"reasoning_content": "r", "loop": {}},
        {"nested": {"a": [[[[{"b": []}]]]]}}, [], "not an object",
    ]
    for k in kwargs:
        put("chat_template_kwargs_fuzz", json.dumps(k, ensure_ascii=False).encode())


def template_seeds(tok_dir):
    msgs = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "h\u00e9llo"},
                         {"role": "assistant", "content": "a", "reasoning_content": "r"}]}
    ctx = json.dumps(msgs, ensure_ascii=False).encode()
    snippets = [
        "{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}",
        "{{ messages[0].content[1:3] }}{{ 'h\u00e9llo'[1] }}{{ 'h\u00e9llo' | upper }}{{ '\u00e9\u00e9' | reverse }}",
        "{% set ns = namespace(x=0) %}{% for i in range(5) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
        "{% macro f(a, b=2) %}{{ a ~ b }}{% endmacro %}{{ f(1) }}{{ messages | tojson(indent=2) }}",
        "{{ 'a,b,c'.split(',') | join('-') }}{{ '%s' | format('x') }}{{ messages | length }}{%- if true -%} y {%- endif %}",
        "{{ 'abc' | truncate(2) }}{{ 'x' * 3 }}{{ [3,1,2] | sort | list }}{{ {'a': 1}.items() | list }}",
    ]
    for s in snippets:
        put("chat_template_fuzz", fdp_string(s.encode()) + ctx + b"\x00")
    for name in ("qwen3", "chatml_tools", "statements", "expressions"):
        src = open(os.path.join(REPO, "tests/fixtures/chat/templates", name + ".jinja"), "rb").read()
        put("chat_template_fuzz", fdp_string(src) + ctx + b"\x00")
    conv = json.load(open(os.path.join(REPO, "tests/fixtures/chat/conversations.json"), encoding="utf-8"))
    items = conv if isinstance(conv, list) else list(conv.values())
    for c in items[:6]:
        put("chat_template_fuzz", json.dumps(c, ensure_ascii=False).encode() + b"\x01\x01\x01")


def sse_seeds():
    streams = [
        b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n',
        b": keep-alive\r\n\r\nevent: error\r\ndata: {\"error\":1}\r\n\r\n",
        b"data:a\rdata: b\r\rid: 1\nretry: 10\ndata\n\n",
        b"data: x\r\n",
    ]
    for s in streams:
        put("sse_parser_fuzz", s + b"\x00")
        put("sse_parser_fuzz", s + b"\x05\x01\x02\x07\x04")


def head_seeds():
    heads = [
        b"POST /v1/chat/completions\nContent-Length: 42\nContent-Type: application/json\nAuthorization: Bearer key",
        b"POST /v1/completions\nTransfer-Encoding: chunked\nAuthorization: Bearer key",
        b"POST /v1/completions\ncontent-length: 5\nContent-Length: 5, 5",
        b"POST /tokenize\nContent-Length: -5",
        b"POST /v1/chat/completions\nContent-Length: 99999999999999999999",
        b"GET /health\nX-A: 1\n" + b"".join(b"X-H%d: v\n" % i for i in range(100)),
        b"POST /v1/models\nContent-Length: 2000000",
    ]
    for h in heads:
        put("request_head_fuzz", h)


def grammar_seeds():
    sources = [
        (0, json.dumps({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                        "age": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
                        "required": ["name"], "additionalProperties": False})),
        (0, json.dumps({"anyOf": [{"type": "number"}, {"type": "boolean"}, {"const": None}], "$defs": {}})),
        (0, json.dumps({"$ref": "#/$defs/n", "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2}}})),
        (1, ""),
        (2, r"[a-z]{1,5}(-[0-9]+)?\.(com|org)"),
        (3, json.dumps(["yes", "no", "\u00e9t\u00e9"])),
        (4, 'root ::= "{" ws pair ("," ws pair)* "}"\npair ::= [a-z]+ ":" ws value\nvalue ::= [0-9]+ | "true"\nws ::= [ \\t\\n]*'),
    ]
    for kind, text in sources:
        picks = bytes((i * 7 + kind) % 256 for i in range(64))
        put("grammar_fuzz", fdp_string(text.encode()) + picks + bytes([kind]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=os.path.join(REPO, ".cache/tokenizer-qwen3"))
    a = ap.parse_args()
    gguf_seeds(a.tokenizer)
    safetensors_seeds()
    tokenizer_json_seeds(a.tokenizer)
    roundtrip_seeds()
    request_seeds()
    responses_seeds()
    messages_seeds()
    kwargs_seeds()
    template_seeds(a.tokenizer)
    sse_seeds()
    head_seeds()
    grammar_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())
