#!/usr/bin/env bash
# Builds qwenserve and runs its tests. CI runs `scripts/test.sh ci` (through .ci/run).
#   scripts/test.sh            release build: every test (ctest: GoogleTest unit tests, the
#                              end-to-end scripts against the float64 reference and the Hugging Face
#                              tokenizer, the node e2e and browser tests)
#   scripts/test.sh asan       AddressSanitizer + UndefinedBehaviorSanitizer build (gcc): the unit
#                              tests and the e2e subset below
#   scripts/test.sh fuzz [S]   the libFuzzer targets (clang, ASan + UBSan) for S seconds each
#                              (default 30) from the committed corpora (scripts/fuzz.sh smoke)
#   scripts/test.sh tsan       ThreadSanitizer build: the engine, worker-pool and thread-pool unit
#                              tests, and the HTTP server under the chaos e2e test
#   scripts/test.sh soak [S]   scripts/soak.sh S (default 120) on the release build
#   scripts/test.sh ci         release, 2 minutes of soak and the fuzz smoke (what .ci/run runs)
#   scripts/test.sh ci-full    ci plus asan and tsan
#   scripts/test.sh all        release and asan (every test under ASan, e2e included)
#
# The e2e subset under ASan: server.test.mjs (every route, streaming, disconnect mid-stream,
# SIGTERM drain), rejections.test.mjs (malformed Content-Length, 411/413/404 before the body,
# startup failures) and chaos.test.mjs (200 clients leaving at random points, trickled heads and
# bodies, a 10x burst, SIGTERM under load): the code that parses what clients send and that runs
# when connections die, where a memory error would be remotely triggerable. admission.test.mjs is
# left out: it asserts sub-50 ms rejections, which an instrumented build does not keep, and its
# engine paths (preemption, prefix cache, KV budget) are covered by the unit tests under ASan.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
"$repo_root/tools/fetch-tokenizer.sh" >/dev/null
export QS_TOKENIZER_DIR="${QS_TOKENIZER_DIR:-$repo_root/.cache/tokenizer-qwen3}"
jobs="${QS_BUILD_JOBS:-$(nproc)}"
e2e_subset=(tests/e2e/server.test.mjs tests/e2e/rejections.test.mjs tests/e2e/chaos.test.mjs)
# Unit tests of the engine and the threads around it (gtest suite names), run under TSan.
tsan_filter='^(EngineFixture|Scheduler|HttpWorkerPool|HttpWorkerThreads|ThreadPool|ThreadPoolPinning)\.'

timed() {  # timed LABEL CMD...: runs CMD and prints how long it took
  local label="$1" start=$SECONDS
  shift
  "$@"
  echo "== $label: $((SECONDS - start)) s"
}

build() {  # build PRESET TARGET...
  local preset="$1"
  shift
  cmake --preset "$preset" >/dev/null
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build --preset "$preset" -j "$jobs" "${targets[@]}"
}

run_release() {
  echo "== release: configure and build"
  timed "release build" build release
  echo "== release: test"
  timed "release tests" ctest --preset release -j 2
}

run_asan() {  # run_asan [full]: full = every ctest test
  echo "== asan: configure and build"
  timed "asan build" build asan qwenserve qwenserve_unit_tests
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  if [[ "${1:-}" == "full" ]]; then
    timed "asan tests" ctest --preset asan -j 2
    return
  fi
  echo "== asan: unit tests"
  timed "asan unit tests" ctest --preset asan -j 2 -E '^(e2e_server|browser_ui|test_)'
  echo "== asan: e2e subset: ${e2e_subset[*]}"
  timed "asan e2e subset" env QS_BIN="$repo_root/build/asan/qwenserve" QS_WORK_DIR="$repo_root/build/asan/tests/work" \
    node --test "${e2e_subset[@]}"
}

run_fuzz() {
  timed "fuzz smoke" "$repo_root/scripts/fuzz.sh" smoke "${1:-30}"
}

run_tsan() {
  echo "== tsan: configure and build"
  timed "tsan build" build tsan qwenserve qwenserve_unit_tests
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1}"
  echo "== tsan: engine and thread tests"
  timed "tsan unit tests" ctest --preset tsan -j 2 -R "$tsan_filter"
  echo "== tsan: HTTP server under the chaos e2e test"
  timed "tsan chaos e2e" env QS_BIN="$repo_root/build/tsan/qwenserve" QS_WORK_DIR="$repo_root/build/tsan/tests/work" \
    node --test tests/e2e/chaos.test.mjs
}

case "${1:-release}" in
  release) run_release ;;
  asan) run_asan ;;
  fuzz) run_fuzz "${2:-30}" ;;
  tsan) run_tsan ;;
  soak) timed "soak" "$repo_root/scripts/soak.sh" "${2:-120}" ;;
  # asan and tsan are not in ci yet: their builds and runs were not measured and verified green
  # on this tree (issue 16 remaining); run them with `scripts/test.sh asan` / `tsan`.
  ci) run_release; timed "soak" "$repo_root/scripts/soak.sh" 120; run_fuzz 30 ;;
  ci-full) run_release; timed "soak" "$repo_root/scripts/soak.sh" 120; run_asan; run_fuzz 30; run_tsan ;;
  all) run_release; run_asan full ;;
  *) echo "usage: scripts/test.sh [release|asan|fuzz [SECONDS]|tsan|soak [SECONDS]|ci|ci-full|all]" >&2; exit 2 ;;
esac
