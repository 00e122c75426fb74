#!/usr/bin/python3
"""Writes a JSONL dataset for `qwenserve loadtest --dataset FILE --multi-turn K`: each line is one
conversation {"messages": [system, user, user, ...]} whose system message carries a long shared
history (--history-words words) and whose user turns are short (--turn-words words). With
--multi-turn K the loadtest sends turn k with the whole history so far, so turns 2..K re-send
~history tokens that a prefix cache already holds: the workload of the multi-turn TTFT benchmark
of the serving-engine issue ("about 512 tokens of history per turn").

Words are drawn from a fixed list with a seeded RNG, different for every conversation so that no
two conversations share a prefix. English words of this list are ~1.2-1.4 Qwen3 tokens each.

Usage: bench/make_multiturn_dataset.py --out multiturn.jsonl [--conversations 8] [--turns 4]
       [--history-words 400] [--turn-words 24] [--seed 0]
"""
import argparse
import json
import random

WORDS = (
    "latency throughput cache token prefill decode batch server request stream queue memory "
    "kernel thread block table sequence context window model weight layer head attention value "
    "key query matrix vector scale error budget median tail percentile client response signal "
    "river mountain garden window morning evening winter summer paper pencil question answer "
    "history science music travel coffee market harbor bridge station library museum forest "
    "ocean island valley desert planet engine signal circuit network packet socket channel"
).split()


def sentence(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join(words).capitalize() + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--history-words", type=int, default=400)
    parser.add_argument("--turn-words", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="utf-8") as out:
        for c in range(args.conversations):
            history = f"Conversation {c}. Notes so far: " + sentence(rng, args.history_words)
            messages = [{"role": "system", "content": history}]
            for t in range(args.turns):
                messages.append({"role": "user", "content": f"Question {t + 1}: " + sentence(rng, args.turn_words)})
            out.write(json.dumps({"messages": messages}) + "\n")


if __name__ == "__main__":
    main()
