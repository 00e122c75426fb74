#!/usr/bin/env bash
# Soak test: `qwenserve serve` on the tiny random-weight test model under a mixed load (chat,
# completions, streaming, cancellations, prefix-cache hits) at 60% of its measured capacity (--load) for
# DURATION (seconds, or with a suffix: 90s, 10m, 1h), sampling RssAnon, threads, open fds, KV
# blocks and P99 every 10 s. Pass/fail rules: tools/soak.py. CI runs `scripts/soak.sh 120`.
#   scripts/soak.sh DURATION [extra tools/soak.py options, e.g. --out samples.tsv]
# Env: QS_BIN (default build/release/qwenserve), QS_TOKENIZER_DIR, QS_WORK_DIR.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
duration="${1:?usage: scripts/soak.sh DURATION (e.g. 120, 10m, 1h)}"
shift
case "$duration" in
  *h) seconds=$((${duration%h} * 3600)) ;;
  *m) seconds=$((${duration%m} * 60)) ;;
  *s) seconds=${duration%s} ;;
  *) seconds=$duration ;;
esac
bin="${QS_BIN:-$repo_root/build/release/qwenserve}"
tokenizer="${QS_TOKENIZER_DIR:-$repo_root/.cache/tokenizer-qwen3}"
work="${QS_WORK_DIR:-$(mktemp -d)}/soak"
mkdir -p "$work"
"$repo_root/tools/fetch-tokenizer.sh" "$tokenizer" >/dev/null
model="$work/tiny.gguf"
[[ -f "$model" ]] || /usr/bin/python3 "$repo_root/tools/qwenserve-make-test-model" --config tiny --format gguf \
  --dtype f32 --init-std fan --tokenizer "$tokenizer" --seed 1 --out "$model" >/dev/null
exec /usr/bin/python3 "$repo_root/tools/soak.py" --bin "$bin" --model "$model" --duration "$seconds" "$@"
