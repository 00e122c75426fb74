#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU (issue 11). PARTIAL: see "Not yet" below.
#
#   scripts/device-check.sh pack   here (the build machine): copies the release binaries and the
#                                  non-system shared libraries they need (ldd) into device-bin/
#                                  (in .gitignore, at most 64 MiB); never builds. cuBLASLt (540 MB) is
#                                  not copied: the GPU machine's Python has it (nvidia-cublas).
#   scripts/device-check.sh        there: runs the phases below, each under `timeout`, logs under
#                                  $OUT (or /tmp/device-check), and prints one summary table last,
#                                  also when a phase fails. Never rebuilds.
# Phases: GPU and driver; the CUDA unit tests (kernels vs float64, conformance incl. cuda); a
# Qwen3-4B-shaped 2-layer bf16 model made there (tools/qwenserve-make-test-model --config 4b-2l);
# CUDA vs CPU logits over 3 sequences with a shared prefix (rel-L2, top-1 agreement where the CPU's
# top-2 gap > 1e-2, length of the leading run of equal argmaxes); decode steps at batch 1 / 8 / 32 /
# 64 / 128 (context 512; batch 1 also at 4096, graph and --enforce-eager) and prefill 512 / 2048
# on that 2-layer model (figures per 2 layers, NOT the issue's 36-layer targets).
# Not yet (missing features): `--load-format dummy` 4B (36 layers), the copy-bandwidth ceiling,
# `serve` + `loadtest --ignore-eos`; the issue's targets cannot be judged from this script's output.
set -u
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bin="$repo/device-bin"

if [[ "${1:-}" == "pack" ]]; then
  set -e
  rm -rf "$bin" && mkdir -p "$bin/lib"
  cp build/release/qwenserve build/release/tests/qwenserve_unit_tests "$bin/"
  for exe in "$bin/qwenserve" "$bin/qwenserve_unit_tests"; do
    ldd "$exe" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libpthread*|libdl.so*|librt.so*|libcublas*|libcuda.so*) ;;
        *) cp -Ln "$lib" "$bin/lib/" ;;
      esac
    done
  done
  size=$(du -sm "$bin" | cut -f1)
  echo "device-bin: ${size} MiB"; ls -la "$bin" "$bin/lib"
  (( size <= 64 )) || { echo "device-bin exceeds 64 MiB" >&2; exit 1; }
  exit 0
fi

out="${OUT:-/tmp/device-check}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
cublas_dir=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
[[ -n "$cublas_dir" ]] && export LD_LIBRARY_PATH="$cublas_dir:$LD_LIBRARY_PATH"
Q="$bin/qwenserve"
model="$out/4b-2l.gguf"
summary=()

# phase NAME SECONDS CMD...: runs CMD under timeout, log in $out/NAME.log, one summary row.
phase() {
  local name="$1" limit="$2" start=$SECONDS rc
  shift 2
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  local status="ok"
  (( rc == 124 )) && status="TIMEOUT"
  (( rc != 0 && rc != 124 )) && status="FAIL($rc)"
  summary+=("$(printf '| %-22s | %-9s | %4ds | %s' "$name" "$status" $((SECONDS - start)) "$(tail -n 1 "$out/$name.log" | cut -c1-110)")")
  return $rc
}

phase gpu 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
phase cuda_tests 90 "$bin/qwenserve_unit_tests" --gtest_brief=1 '--gtest_filter=Cuda*:*Conformance*'
phase make_model 120 python3 tools/qwenserve-make-test-model --config 4b-2l --format gguf --dtype bf16 \
  --tokenizer .cache/tokenizer-qwen3 --seed 1 --init-std fan --out "$model"

compare_logits() {  # CUDA vs CPU on 3 sequences sharing a 40-token prefix
  local prefix="" i
  for i in $(seq 1 40); do prefix+="$(( (i * 7919) % 151000 )),"; done
  local seqs=("${prefix}11,12,13,14,15,16,17,18,19,20,21,22,23" "${prefix}901,902,903" "${prefix}5000,77,5001,78,5002")
  for i in 0 1 2; do
    "$Q" logits -m "$model" --device cpu --tokens "${seqs[$i]%,}" -o "$out/cpu$i.f32" || return 1
    "$Q" logits -m "$model" --device cuda --tokens "${seqs[$i]%,}" -o "$out/cuda$i.f32" || return 1
  done
  python3 - "$out" <<'PY'
import sys, numpy as np
out = sys.argv[1]; V = 151936
rels, agree, total, runs = [], 0, 0, []
for i in range(3):
    c = np.fromfile(f"{out}/cpu{i}.f32", dtype=np.float32).reshape(-1, V).astype(np.float64)
    g = np.fromfile(f"{out}/cuda{i}.f32", dtype=np.float32).reshape(-1, V).astype(np.float64)
    rels.append(np.linalg.norm(g - c) / np.linalg.norm(c))
    top2 = np.sort(c, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-2
    same = c.argmax(1) == g.argmax(1)
    agree += int((same & clear).sum()); total += int(clear.sum())
    runs.append(int(np.argmin(np.append(same, False))))
print(f"rel-L2 max {max(rels):.2e}; top-1 agreement {agree}/{total} where CPU top-2 gap > 1e-2; equal-argmax runs {runs}")
sys.exit(0 if max(rels) <= 1e-2 and agree >= 0.99 * total else 1)
PY
}
phase logits_vs_cpu 120 compare_logits

for n in 1 8 32 64 128; do
  phase "decode_b${n}_c512" 60 "$Q" bench -m "$model" --device cuda --decode-batch "$n" --decode-context 512 -r 5
done
phase decode_b1_c4096 60 "$Q" bench -m "$model" --device cuda --decode-batch 1 --decode-context 4096 -r 5
phase decode_b1_c512_eager 60 "$Q" bench -m "$model" --device cuda --enforce-eager --decode-batch 1 --decode-context 512 -r 5
phase decode_b1_c4096_eager 60 "$Q" bench -m "$model" --device cuda --enforce-eager --decode-batch 1 --decode-context 4096 -r 5
phase prefill_512_2048 90 "$Q" bench -m "$model" --device cuda -p 512,2048 -n 0 -r 3

echo
echo "## device-check summary (4B-shaped 2-layer bf16 model; not the 36-layer targets)"
printf '| %-22s | %-9s | %5s | %s\n' phase status time "last line of the log ($out/<phase>.log)"
for row in "${summary[@]}"; do echo "$row"; done
