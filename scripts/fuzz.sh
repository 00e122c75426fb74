#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (tests/fuzz/), which live in the shared sanitizer build
# (preset "asan": clang, ASan + UBSan, the same library as the unit tests and the e2e subset).
#
#   scripts/fuzz.sh smoke [SECONDS]          every target for SECONDS (default 30) from the committed
#                                            seeds; fails on the first crash, leak, timeout or failed
#                                            invariant (CI)
#   scripts/fuzz.sh campaign SECONDS [T...]  offline campaign: each target (or the ones named) for
#                                            SECONDS more, at idle priority, one process at a time, resuming
#                                            from the committed corpus (tests/fuzz/corpus/<target>)
#                                            plus this machine's (<state>/corpus/<target>); inputs
#                                            that add coverage are merged back into the committed
#                                            corpus, and one line per run is appended to the
#                                            committed ledger tests/fuzz/CAMPAIGN.tsv (commit both)
#   scripts/fuzz.sh report                   cumulative CPU seconds, executions, coverage and
#                                            crashes per target from tests/fuzz/CAMPAIGN.tsv, and
#                                            the CPU seconds still missing to the goal of 1 CPU-hour
#   scripts/fuzz.sh replay FILE...           runs inputs (e.g. a crash) through their target, named
#                                            by the corpus directory they sit in or by --target T
#
# State (logs, crashes, the local corpus): $QS_FUZZ_STATE_DIR (default .cache/fuzz). Crashing
# inputs go to <state>/crashes/<target>/. Turn each into a regression test: fix the bug, add a
# unit test for it and commit the input under tests/fuzz/regressions/<target>/ (every run, the
# smoke included, replays those first). See tests/fuzz/README.md.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
mode="${1:-smoke}"
shift || true
build="$repo_root/build/asan/tests/fuzz"
# Idle priority for the campaign: SCHED_IDLE (chrt, util-linux) runs only on CPU time nothing else
# wants. `nice -n 19` alone does not yield to a build or a benchmark started from another session
# when the kernel groups tasks per session (sched_autogroup_enabled = 1, Debian's default): the
# groups then share the CPUs equally whatever their nice values.
idle_prefix="nice -n 19"
if chrt --idle 0 true 2>/dev/null; then idle_prefix="chrt --idle 0 nice -n 19"; fi
# libFuzzer's -timeout is wall time: an idle-priority process starved by a build for half a minute
# reports a 1-s input as a timeout (three such reports in session 19, each replaying in 16 ms to
# 1.5 s). The campaign allows 120 s of wall time per input; a real hang still ends there, and
# slow-unit-* files name inputs above 10 s. The smoke (CI, normal priority) keeps 20 s.
campaign_timeout=120
state="${QS_FUZZ_STATE_DIR:-$repo_root/.cache/fuzz}"
ledger="$repo_root/tests/fuzz/CAMPAIGN.tsv"
goal_cpu_s=3600
export QS_TOKENIZER_DIR="${QS_TOKENIZER_DIR:-$repo_root/.cache/tokenizer-qwen3}"

all_targets() { (cd tests/fuzz && ls ./*_fuzz.cc | sed 's#^\./##; s#\.cc$##'); }

dict_for() {
  case "$1" in
    gguf_reader_fuzz|safetensors_reader_fuzz) echo "tests/fuzz/dict/gguf.dict" ;;
    chat_template_fuzz) echo "tests/fuzz/dict/jinja.dict" ;;
    openai_request_fuzz|responses_request_fuzz|messages_request_fuzz|chat_template_kwargs_fuzz|tokenizer_json_fuzz)
      echo "tests/fuzz/dict/json.dict" ;;
    *) echo "" ;;
  esac
}

build_targets() {
  "$repo_root/tools/fetch-tokenizer.sh" >/dev/null
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "${QS_BUILD_JOBS:-$(nproc)}" --target qwenserve_fuzz_targets
}

# run_target TARGET SECONDS CORPUS_DIR LOG: one libFuzzer run; its exit status.
run_target() {
  local target="$1" seconds="$2" corpus="$3" log="$4"
  local dict
  dict="$(dict_for "$target")"
  mkdir -p "$state/crashes/$target" "$corpus"
  local args=(-max_total_time="$seconds" -timeout="${QS_FUZZ_TIMEOUT:-20}" -rss_limit_mb=4096 -max_len=8192 -print_final_stats=1
              -artifact_prefix="$state/crashes/$target/")
  [[ -n "$dict" ]] && args+=(-dict="$dict")
  # The scratch files of the file-reader targets go to a directory removed afterwards.
  local tmp
  tmp="$(mktemp -d)"
  local rc=0
  local seeds=("tests/fuzz/corpus/$target")
  [[ -d "tests/fuzz/regressions/$target" ]] && seeds+=("tests/fuzz/regressions/$target")
  TMPDIR="$tmp" ${QS_FUZZ_NICE:-} "$build/$target" "${args[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  rm -rf "$tmp"
  return $rc
}

summary_of() {  # LOG -> "execs cov ft"
  local log="$1" execs cov ft
  execs="$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1)"
  cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')"
  ft="$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | awk '{print $2}')"
  echo "${execs:-0} ${cov:-0} ${ft:-0}"
}

smoke_one() {  # smoke_one TARGET: one smoke run from the committed seeds; prints one line
  local target="$1" work log start rc=0
  work="$(mktemp -d)"
  log="$state/smoke-$target.log"
  start=$SECONDS
  run_target "$target" "$seconds" "$work" "$log" || rc=$?
  rm -rf "$work"
  if ((rc == 0)); then
    read -r execs cov ft <<<"$(summary_of "$log")"
    echo "fuzz smoke $target: ok, $execs executions in $((SECONDS - start)) s, cov $cov, ft $ft"
    return 0
  fi
  echo "fuzz smoke $target: FAILED (log $log)"
  grep -E 'ERROR|fuzz check failed|SUMMARY|Test unit written' "$log" | head -20 || true
  return 1
}

case "$mode" in
  smoke)
    seconds="${1:-30}"
    build_targets
    mkdir -p "$state"
    # As many targets at once as there are CPUs (QS_FUZZ_JOBS).
    export -f run_target summary_of dict_for smoke_one
    export build state repo_root seconds
    all_targets | xargs -P "${QS_FUZZ_JOBS:-$(nproc)}" -I{} bash -c 'smoke_one {}' && exit 0
    exit 1
    ;;
  campaign)
    seconds="${1:?usage: scripts/fuzz.sh campaign SECONDS [TARGET...]}"
    shift
    targets=("$@")
    ((${#targets[@]})) || mapfile -t targets < <(all_targets)
    build_targets
    mkdir -p "$state"
    [[ -f "$ledger" ]] || printf 'date\ttarget\tcpu_s\texecutions\tcov\tft\tcrashes\tcorpus_files\n' >"$ledger"
    for target in "${targets[@]}"; do
      log="$state/campaign-$target.log"
      corpus="$state/corpus/$target"
      # (The crash directory must exist before counting: under pipefail a failing find ended the
      # whole campaign silently on a machine's first run.)
      mkdir -p "$corpus" "$state/crashes/$target"
      # slow-unit-* files are libFuzzer's wall-clock reports (a nice-19 process on a shared machine
      # is often descheduled for seconds), not findings: they are not counted as crashes.
      before=$(find "$state/crashes/$target" -type f ! -name 'slow-unit-*' | wc -l)
      t0=$(date +%s)
      rc=0
      # CPU seconds (user + system) of the run, which on a shared machine is less than its wall time.
      TIMEFORMAT='%U %S'
      { time QS_FUZZ_NICE="$idle_prefix" QS_FUZZ_TIMEOUT="$campaign_timeout" run_target "$target" "$seconds" "$corpus" "$log" || rc=$?; } 2>"$state/time"
      t1=$(date +%s)
      cpu="$(awk '{printf "%d", $1 + $2}' "$state/time")"
      after=$(find "$state/crashes/$target" -type f ! -name 'slow-unit-*' | wc -l)
      read -r execs cov ft <<<"$(summary_of "$log")"
      # Inputs that add coverage to the committed corpus go into it, so that the next campaign (on
      # any machine, from a fresh clone) resumes from here.
      scratch="$(mktemp -d)"
      TMPDIR="$scratch" $idle_prefix "$build/$target" -merge=1 -max_len=8192 -timeout="$campaign_timeout" -rss_limit_mb=4096 \
        "tests/fuzz/corpus/$target" "$corpus" >"$state/merge-$target.log" 2>&1 || echo "campaign $target: merge failed ($state/merge-$target.log)"
      rm -rf "$scratch"
      files=$(find "tests/fuzz/corpus/$target" -type f | wc -l)
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$target" "$cpu" "$execs" "$cov" "$ft" \
        "$((after - before))" "$files" >>"$ledger"
      echo "campaign $target: rc $rc, $((t1 - t0)) s wall, $cpu s CPU, $execs executions, cov $cov, ft $ft," \
        "new crashes $((after - before)), committed corpus $files files"
    done
    ;;
  report)
    [[ -f "$ledger" ]] || { echo "no campaign yet ($ledger)"; exit 0; }
    awk -F'\t' -v goal="$goal_cpu_s" 'NR > 1 { cpu[$2] += $3; ex[$2] += $4; cov[$2] = $5; ft[$2] = $6; cr[$2] += $7; n[$2] = $8 }
      END { printf "%-28s %8s %14s %6s %7s %8s %7s %8s\n", "target", "cpu_s", "executions", "cov", "ft", "crashes", "corpus", "to_goal";
            for (t in cpu) printf "%-28s %8d %14d %6d %7d %8d %7d %8d\n", t, cpu[t], ex[t], cov[t], ft[t], cr[t], n[t],
                                  cpu[t] < goal ? goal - cpu[t] : 0 }' \
      "$ledger" | sort
    ;;
  replay)
    target=""
    if [[ "${1:-}" == "--target" ]]; then target="$2"; shift 2; fi
    for f in "$@"; do
      t="${target:-$(basename "$(dirname "$f")")}"
      "$build/$t" "$f"
    done
    ;;
  *)
    echo "usage: scripts/fuzz.sh smoke [SECONDS] | campaign SECONDS [TARGET...] | report | replay FILE..." >&2
    exit 2
    ;;
esac
