#!/usr/bin/env python3
"""Decode speed of a constrained (JSON-schema) request against the same request unconstrained.

Sends pairs of non-streaming chat requests to a running `qwenserve serve` (alternating which of the
two goes first), one with `response_format: {type: json_schema}` and one without, same prompt, same
`max_tokens`, temperature 0, and the end-of-text tokens suppressed by logit_bias in both (`--suppress-ids`) so that
the unconstrained request runs to max_tokens (the constrained one may still end where its grammar
ends, which does not bias a per-token rate). Decode tokens/s of a request = (completion_tokens - 1) / decode ms, both from the
response (`usage.completion_tokens`, the `decode;dur=` entry of its `Server-Timing` header: ms from
the first token to the last). Prints each pair and the median ratio constrained / unconstrained
(the issue 13 target is >= 0.95 on the 4B-shaped model).

The default schema is an array of up to 64 objects with a string and an integer, so a random-weight
model keeps generating until max_tokens. Run one request at a time (concurrency 1): the ratio is the
per-sequence cost of computing masks that the forward pass does not hide.

Start the server with `--no-output-guard`: a random-weight model's free text soon repeats itself and
the degenerate-output guard would end it early.
Example: qwenserve serve -m 4b-q4_k_m.gguf -t 2 --no-output-guard &
         bench/constrained_vs_free.py --url http://127.0.0.1:8000 --pairs 5 --max-tokens 64
Standard library only; exits 2 with a message when the server answers an error.
"""
import argparse
import json
import statistics
import sys
import urllib.error
import urllib.request

DEFAULT_SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "maxItems": 64, "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["name", "count"], "additionalProperties": False}}},
    "required": ["items"], "additionalProperties": False,
}


def post(url, body):
    """POSTs body to url; returns (parsed JSON, Server-Timing entries {name: ms})."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            timing = {}
            for part in resp.headers.get("Server-Timing", "").split(","):
                fields = [f.strip() for f in part.split(";")]
                for f in fields[1:]:
                    if f.startswith("dur="):
                        timing[fields[0]] = float(f[4:])
            return json.load(resp), timing
    except urllib.error.HTTPError as e:
        print(f"constrained_vs_free: HTTP {e.code}: {e.read()[:500]!r}", file=sys.stderr)
        sys.exit(2)


def decode_tps(url, model, max_tokens, schema, suppress_ids=()):
    body = {"model": model, "messages": [{"role": "user", "content": "List some fruits with their counts as JSON."}],
            "max_tokens": max_tokens, "temperature": 0}
    if suppress_ids:
        body["logit_bias"] = {str(i): -100 for i in suppress_ids}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "fruits", "schema": schema}}
    out, timing = post(url + "/v1/chat/completions", body)
    tokens = out["usage"]["completion_tokens"]
    if tokens < 2 or timing.get("decode", 0) <= 0:
        print(f"constrained_vs_free: too few tokens ({tokens}) or no decode timing {timing}", file=sys.stderr)
        sys.exit(2)
    return (tokens - 1) / (timing["decode"] / 1000.0), tokens


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--model", default="", help="served model name (default: the server's only model)")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--schema", help="JSON schema file (default: an array of name/count objects)")
    p.add_argument("--suppress-ids", default="151643,151645",
                   help="token ids given logit_bias -100 in both requests, so that neither ends early at an "
                        "end-of-text token (default: Qwen3's <|endoftext|> and <|im_end|>; '' for none). A "
                        "constrained request still ends where its grammar allows only those tokens.")
    args = p.parse_args()
    schema = json.load(open(args.schema)) if args.schema else DEFAULT_SCHEMA
    suppress = [int(t) for t in args.suppress_ids.split(",") if t.strip()]
    model = args.model
    if not model:
        with urllib.request.urlopen(args.url + "/v1/models", timeout=30) as resp:
            model = json.load(resp)["data"][0]["id"]
    decode_tps(args.url, model, 8, None)  # warm-up
    ratios = []
    for i in range(args.pairs):
        order = ["free", "constrained"] if i % 2 == 0 else ["constrained", "free"]
        res = {}
        for kind in order:
            res[kind] = decode_tps(args.url, model, args.max_tokens, schema if kind == "constrained" else None, suppress)
        ratio = res["constrained"][0] / res["free"][0]
        ratios.append(ratio)
        print(f"pair {i + 1}: constrained {res['constrained'][0]:.2f} t/s ({res['constrained'][1]} tokens), "
              f"unconstrained {res['free'][0]:.2f} t/s ({res['free'][1]} tokens), ratio {ratio:.3f}")
    print(f"median ratio constrained / unconstrained over {args.pairs} pairs: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
