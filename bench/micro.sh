#!/usr/bin/env bash
# Builds the micro benchmarks (bench/CMakeLists.txt) in Release and runs one or all of them.
#
#   bench/micro.sh [TARGET] [benchmark flags...]     e.g. bench/micro.sh answer_bytes_bench
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
targets=(answer_bytes_bench xadd_format_bench)
if (($#)) && [[ $1 != -* ]]; then
  targets=("$1")
  shift
fi
mkdir -p bench/out
build_release build-bench bench/out/micro-build.log "${targets[@]}"
for t in "${targets[@]}"; do
  build-bench/bench/"$t" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true "$@"
done
