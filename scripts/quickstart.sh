#!/usr/bin/env bash
# One command from a fresh clone to generated tokens:
#   scripts/quickstart.sh [small|tiny|4b] [gguf|hf]
# installs dependencies, builds the release preset, fetches the Qwen3 tokenizer, writes a
# random-weight test model into .cache/models/ and runs `qwenserve generate --chat` on it.
# The 4b model has the real Qwen3-4B-Instruct-2507 shapes (about 8 GB as f16 GGUF / bf16 HF).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
config="${1:-small}"
format="${2:-gguf}"
case "$format" in
  gguf) dtype=f16; out=".cache/models/qwen3-$config-f16.gguf" ;;
  hf) dtype=bf16; out=".cache/models/qwen3-$config-bf16" ;;
  *) echo "format must be gguf or hf" >&2; exit 2 ;;
esac
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
tools/fetch-tokenizer.sh
if [[ ! -e "$out" ]]; then
  mkdir -p .cache/models
  tools/qwenserve-make-test-model --config "$config" --format "$format" --dtype "$dtype" \
    --tokenizer .cache/tokenizer-qwen3 --seed 1 --out "$out"
fi
build/release/qwenserve generate --model "$out" --chat \
  --prompt "Write a haiku about fast inference." --max-tokens 32 --seed 1
