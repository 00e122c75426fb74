#!/usr/bin/env bash
# Installs qwenserve's build and test dependencies: Debian packages (compiler toolchain, CMake,
# Ninja, GoogleTest, nlohmann-json, CLI11, PCRE2, utf8proc, numpy for the float64 reference) and the
# npm packages used as independent references by the tests (package.json). chromium drives the web
# UI test (with npm playwright-core); prometheus provides promtool for the /metrics format check and
# the alert-rule tests, yamllint lints deploy/. The deploy tests also need kubectl >= 1.27 with
# kustomize v5, which Debian 12 does not package (its kubectl is 1.20): use the machine's kubectl.
# clang + libclang-rt-14-dev (libFuzzer and the sanitizer runtimes) build the fuzz targets.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
packages=(build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev
          nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libpcre2-dev libutf8proc-dev python3 python3-numpy
          libjs-marked node-dompurify libjs-highlight.js libjs-chart.js
          chromium prometheus yamllint
          clang libclang-rt-14-dev
          )
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# node/npm may come from elsewhere than Debian (e.g. nodesource); only require that they run.
command -v node >/dev/null && command -v npm >/dev/null
(cd "$repo_root" && npm install --no-audit --no-fund --silent)
