"""GGUF tokenizer metadata from a Hugging Face tokenizer.json + tokenizer_config.json, following
what llama.cpp's convert_hf_to_gguf.py (get_vocab_base / _set_vocab_gpt2, gguf-py SpecialVocab)
writes for Qwen2/Qwen3:

  tokenizer.ggml.model       "gpt2"
  tokenizer.ggml.pre         "qwen2"
  tokenizer.ggml.tokens      vocab_size strings, the byte-level BPE spellings of tokenizer.json;
                             ids with no token are "[PAD<id>]"
  tokenizer.ggml.token_type  int32: 1 normal, 3 control (added tokens marked special, or that look
                             special: "<|...|>"), 4 user-defined (other added tokens, e.g.
                             <think>), 5 unused ([PAD<id>] fillers)
  tokenizer.ggml.merges      "left right" strings (a space inside a part would be written as
                             U+0120+256; Qwen's merges have none)
  tokenizer.ggml.bos/eos/padding_token_id, tokenizer.ggml.add_bos_token, tokenizer.chat_template
"""
from __future__ import annotations

import json
import os
import sys

TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED = 1, 3, 4, 5


def _looks_special(text: str) -> bool:
    # llama.cpp treats these spellings as control tokens even when not marked special.
    if text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]"):
        return True
    if text.startswith("<|") and text.endswith("|>"):
        return True
    if text.startswith("<\uff5c") and text.endswith("\uff5c>"):
        return True
    return text.startswith("<unused") and text.endswith(">")


def load_tokenizer(tokenizer_dir: str):
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        tok_cfg = json.load(f)
    return tok, tok_cfg


def gguf_vocab_metadata(tokenizer_dir: str, vocab_size: int, bos_id: int, eos_id: int) -> list:
    """Returns [(key, kind, value)] for the GGUF writer, kind in "string", "string_array",
    "int32_array", "uint32", "bool"."""
    tok, tok_cfg = load_tokenizer(tokenizer_dir)
    model = tok["model"]
    if model.get("type") != "BPE":
        raise ValueError("tokenizer.json: only BPE (gpt2-style) tokenizers are supported")
    id_to_tok: dict[int, str] = {i: t for t, i in model["vocab"].items()}
    added: dict[int, dict] = {}
    for a in tok.get("added_tokens", []):
        id_to_tok[a["id"]] = a["content"]
        added[a["id"]] = a
    n_tok = max(id_to_tok) + 1
    if n_tok > vocab_size:
        print(f"warning: tokenizer has {n_tok} ids but vocab_size is {vocab_size}; "
              f"tokens and merges past the vocabulary are dropped", file=sys.stderr)
    tokens, types = [], []
    for i in range(vocab_size):
        t = id_to_tok.get(i)
        if t is None:
            tokens.append(f"[PAD{i}]")
            types.append(TOKEN_UNUSED)
        elif i in added:
            if added[i].get("special") or _looks_special(t):
                types.append(TOKEN_CONTROL)
            else:
                t = t.replace("\u2581", " ")
                types.append(TOKEN_USER_DEFINED)
            tokens.append(t)
        else:
            tokens.append(t)
            types.append(TOKEN_NORMAL)

    merges = []
    for m in model.get("merges", []):
        if isinstance(m, str):
            left, right = m.split(" ", 1)
        else:
            left, right = m
        merges.append((left, right))
    if n_tok > vocab_size:
        kept = {t for t in tokens}
        merges = [(l, r) for l, r in merges if l in kept and r in kept and l + r in kept]
    merge_strs = [" ".join("".join(chr(ord(c) + 256) if c == " " else c for c in part)
                           for part in (l, r)) for l, r in merges]

    def tok_id(key):
        v = tok_cfg.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            for i, a in added.items():
                if a["content"] == v:
                    return i
            return model["vocab"].get(v)
        return None

    meta = [
        ("tokenizer.ggml.model", "string", "gpt2"),
        ("tokenizer.ggml.pre", "string", "qwen2"),
        ("tokenizer.ggml.tokens", "string_array", tokens),
        ("tokenizer.ggml.token_type", "int32_array", types),
        ("tokenizer.ggml.merges", "string_array", merge_strs),
    ]
    # SpecialVocab order: ids named in tokenizer_config.json first, config.json ids as fallback.
    eos = tok_id("eos_token")
    eos = eos if eos is not None else eos_id
    bos = tok_id("bos_token")
    bos = bos if bos is not None else bos_id
    pad = tok_id("pad_token")
    for key, v in (("tokenizer.ggml.bos_token_id", bos), ("tokenizer.ggml.eos_token_id", eos),
                   ("tokenizer.ggml.padding_token_id", pad)):
        if v is not None and v < vocab_size:
            meta.append((key, "uint32", v))
    if "add_bos_token" in tok_cfg:
        meta.append(("tokenizer.ggml.add_bos_token", "bool", bool(tok_cfg["add_bos_token"])))
    if "add_eos_token" in tok_cfg:
        meta.append(("tokenizer.ggml.add_eos_token", "bool", bool(tok_cfg["add_eos_token"])))
    tmpl = tok_cfg.get("chat_template")
    if isinstance(tmpl, str):
        meta.append(("tokenizer.chat_template", "string", tmpl))
    return meta
