#!/usr/bin/env bash
# Builds qwenserve and runs its tests. CI runs `scripts/test.sh ci` (through .ci/run).
#   scripts/test.sh            release build: every test (ctest: GoogleTest unit tests, the
#                              end-to-end scripts against the float64 reference and the Hugging Face
#                              tokenizer, the node e2e and browser tests)
#   scripts/test.sh asan       the shared sanitizer build (preset asan: clang, ASan + UBSan +
#                              libFuzzer instrumentation): the unit tests, the e2e subset below and
#                              the fuzz smoke (every libFuzzer target 30 s, scripts/fuzz.sh smoke)
#   scripts/test.sh fuzz [S]   the fuzz smoke alone, S seconds per target (default 30)
#   scripts/test.sh tsan       ThreadSanitizer build (preset tsan, gcc): the engine and thread tests
#                              (qwenserve_thread_tests, the suites in $tsan_filter below) and the
#                              HTTP server under the chaos e2e test
#   scripts/test.sh soak [S]   scripts/soak.sh S (default 120) on the release build
#   scripts/test.sh ci         release, 2 minutes of soak, the asan stage (unit tests, the e2e
#                              subset, the fuzz smoke) and the tsan stage, with the seconds of
#                              every stage (what .ci/run runs)
#   scripts/test.sh ci-full    the same as ci (kept for scripts that call it)
#   scripts/test.sh all        release and asan (every ctest test under ASan, e2e included)
#
# The e2e subset under ASan: server.test.mjs (every route, streaming, disconnect mid-stream,
# SIGTERM drain), api_translation.test.mjs (/v1/responses and /v1/messages, which parse and
# re-shape client JSON), rejections.test.mjs (malformed Content-Length, 411/413/404 before the
# body, startup failures) and chaos.test.mjs (200 clients leaving at random points, trickled heads
# and bodies, a 10x burst, SIGTERM under load): the code that parses what clients send and that
# runs when connections die, where a memory error would be remotely triggerable. Left out:
# admission.test.mjs and slo.test.mjs assert latencies (sub-50 ms rejections, TTFT bounds) that an
# instrumented build does not keep, and their engine paths (preemption, prefix cache, KV budget)
# run under ASan in the unit tests; cors, structured_outputs and the browser test add no parser of
# client bytes that the unit tests and fuzz targets do not already run.
#
# Sanitizer options: tests/sanitizers/ (suppressions, each with the reason it is a false positive).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
"$repo_root/tools/fetch-tokenizer.sh" >/dev/null
export QS_TOKENIZER_DIR="${QS_TOKENIZER_DIR:-$repo_root/.cache/tokenizer-qwen3}"
jobs="${QS_BUILD_JOBS:-$(nproc)}"
e2e_subset=(tests/e2e/server.test.mjs tests/e2e/api_translation.test.mjs tests/e2e/rejections.test.mjs
            tests/e2e/chaos.test.mjs)
# Unit tests of the engine and the threads around it (gtest suite names), run under TSan.
tsan_filter='EngineFixture.*:EngineGrammarTest.*:Scheduler.*:HttpWorkerPool.*:HttpWorkerThreads.*:ThreadPool.*:'
tsan_filter+='ThreadPoolPinning.*:SseStream.*:ServerMetrics.*:MetricsServerMetrics.*:GrammarCompiler.*:'
tsan_filter+='TokenizerQwen.Concurrent*'
export QS_SOURCE_DIR="$repo_root"
stage_times=()

timed() {  # timed LABEL CMD...: runs CMD and prints (and records) how long it took
  local label="$1" start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "== $label: $((SECONDS - start)) s$( ((rc)) && echo " (FAILED, exit $rc)")"
  stage_times+=("$(printf '%-22s %5d s%s' "$label" $((SECONDS - start)) "$( ((rc)) && echo '  FAILED')")")
  return $rc
}

print_times() {
  echo "== stage times"
  printf '   %s\n' "${stage_times[@]}"
}

build() {  # build PRESET TARGET...
  local preset="$1"
  shift
  cmake --preset "$preset" >/dev/null
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build --preset "$preset" -j "$jobs" "${targets[@]}"
}

# gtest_shards BINARY LOG_PREFIX GTEST_ARGS...: the binary as $jobs shards at once (one process
# each, so the Qwen3 tokenizer and test models load once per shard, not once per test as under
# ctest); on failure prints the failed tests and sanitizer reports.
gtest_shards() {
  local bin="$1" prefix="$2" rc=0 i
  shift 2
  local pids=()
  mkdir -p "$(dirname "$prefix")"
  for ((i = 0; i < jobs; i++)); do
    GTEST_TOTAL_SHARDS="$jobs" GTEST_SHARD_INDEX="$i" "$bin" "$@" >"$prefix.$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      rc=1
      echo "== shard $i failed ($prefix.$i.log):"
      grep -E '^\[  FAILED|Sanitizer|SUMMARY|runtime error|^    #[0-9]+ ' "$prefix.$i.log" | head -60 || tail -30 "$prefix.$i.log"
    fi
    grep -E '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ test' "$prefix.$i.log" | sed "s/^/   shard $i: /" || true
  done
  return $rc
}

run_release() {
  echo "== release: configure and build"
  timed "release build" build release
  echo "== release: test"
  timed "release tests" ctest --preset release -j 2
}

asan_env() {
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$repo_root/tests/sanitizers/lsan.supp:print_suppressions=0}"
}

run_asan() {  # run_asan [full]: full = every ctest test
  echo "== asan: configure and build (unit tests, server, fuzz targets)"
  timed "asan build" build asan qwenserve qwenserve_unit_tests qwenserve_fuzz_targets
  asan_env
  if [[ "${1:-}" == "full" ]]; then
    timed "asan tests" ctest --preset asan -j 2
    return
  fi
  echo "== asan: unit tests"
  timed "asan unit tests" gtest_shards build/asan/tests/qwenserve_unit_tests build/asan/logs/unit
  echo "== asan: e2e subset: ${e2e_subset[*]}"
  timed "asan e2e subset" env QS_BIN="$repo_root/build/asan/qwenserve" QS_WORK_DIR="$repo_root/build/asan/tests/work" \
    node --test "${e2e_subset[@]}"
  run_fuzz 30
}

run_fuzz() {
  timed "fuzz smoke" "$repo_root/scripts/fuzz.sh" smoke "${1:-30}"
}

run_tsan() {
  echo "== tsan: configure and build"
  timed "tsan build" build tsan qwenserve qwenserve_thread_tests
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:suppressions=$repo_root/tests/sanitizers/tsan.supp}"
  echo "== tsan: engine and thread tests"
  timed "tsan unit tests" gtest_shards build/tsan/tests/qwenserve_thread_tests build/tsan/logs/unit --gtest_filter="$tsan_filter"
  echo "== tsan: HTTP server under the chaos e2e test"
  # The chaos test's client-side waits (60 s for every connection to end, 5 s for /health) are
  # bounds measured on the release build; TSan runs the server 5-15x slower, so they are scaled
  # (QS_E2E_TIME_SCALE, tests/e2e/server_harness.mjs). The server's own deadlines are not.
  timed "tsan chaos e2e" env QS_BIN="$repo_root/build/tsan/qwenserve" QS_WORK_DIR="$repo_root/build/tsan/tests/work" \
    QS_E2E_TIME_SCALE="${QS_E2E_TIME_SCALE:-5}" node --test tests/e2e/chaos.test.mjs
}

trap print_times EXIT
case "${1:-release}" in
  release) run_release ;;
  asan) run_asan ;;
  fuzz) run_fuzz "${2:-30}" ;;
  tsan) run_tsan ;;
  soak) timed "soak" "$repo_root/scripts/soak.sh" "${2:-120}" ;;
  ci|ci-full) run_release; timed "soak" "$repo_root/scripts/soak.sh" 120; run_asan; run_tsan ;;
  all) run_release; run_asan full ;;
  *) echo "usage: scripts/test.sh [release|asan|fuzz [SECONDS]|tsan|soak [SECONDS]|ci|ci-full|all]" >&2; exit 2 ;;
esac
