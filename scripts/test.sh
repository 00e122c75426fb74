#!/usr/bin/env bash
# Builds qwenserve and runs every test (ctest: GoogleTest unit tests and the end-to-end scripts
# that compare against the float64 reference and the Hugging Face tokenizer).
#   scripts/test.sh            release build
#   scripts/test.sh asan       AddressSanitizer + UndefinedBehaviorSanitizer build
#   scripts/test.sh all        both
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
"$repo_root/tools/fetch-tokenizer.sh" >/dev/null
presets=("${1:-release}")
[[ "${1:-}" == "all" ]] && presets=(release asan)
jobs="${QS_BUILD_JOBS:-$(nproc)}"
for preset in "${presets[@]}"; do
  echo "== $preset: configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "== $preset: test"
  ctest --preset "$preset" -j 2
done
