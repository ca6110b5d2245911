#!/usr/bin/env bash
# Fuzzes the server's input code: builds the harnesses of fuzz/ with clang-14 and libFuzzer,
# AddressSanitizer and UBSan (build-fuzz/, a configuration of its own with -DWALLET_FUZZ=ON that
# builds nothing else), then runs each harness for SECONDS (default 60), one after the other,
# under nice. Each starts from its seed corpus (fuzz/corpus/NAME, never written) and the inputs
# earlier runs found (build-fuzz/corpus/NAME, where new ones go). Exits non-zero if any harness
# failed, and prints where each reproducer is and how to replay it. fuzz/README.md says more.
#
#   scripts/fuzz.sh [SECONDS] [NAME...]     e.g. scripts/fuzz.sh 120, scripts/fuzz.sh 30 amount url
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: scripts/fuzz.sh [SECONDS] [NAME...]  (SECONDS: a positive integer, default 60)" >&2
  exit 2
fi
shift || true
harnesses=("$@")
if ((${#harnesses[@]} == 0)); then harnesses=(json_input amount url http_request); fi

bash scripts/install-deps.sh clang-14 libfuzzer-14-dev
build=build-fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALLET_FUZZ=ON >/dev/null
nice ninja -C "$build" -j2 "${harnesses[@]/%/_fuzz}"

# Any sanitizer report ends the run as a crash, with a reproducer.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}

failed=()
summary=()
for name in "${harnesses[@]}"; do
  seeds=fuzz/corpus/$name
  scratch=$build/corpus/$name
  artifacts=$build/artifacts/$name
  log=$build/logs/$name.log
  mkdir -p "$scratch" "$artifacts" "$(dirname "$log")"
  dict=()
  if [[ -f fuzz/$name.dict ]]; then dict=(-dict="fuzz/$name.dict"); fi
  echo "fuzz: $name for ${seconds}s (log: $log)"
  status=0
  nice "$build/fuzz/${name}_fuzz" "$scratch" "$seeds" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" >"$log" 2>&1 || status=$?
  runs=$(grep -oE '^stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || true)
  ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || true)
  corp=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' <<<"$last" | cut -d' ' -f2 || true)
  summary+=("$(printf '%-13s runs %-10s cov %-6s ft %-7s corpus %-10s %s' "$name" "${runs:-?}" "${cov:-?}" \
    "${ft:-?}" "${corp:-?}" "$([[ $status == 0 ]] && echo ok || echo FAILED)")")
  if ((status != 0)); then
    failed+=("$name")
    reproducer=$(grep -oE "(Test unit written to|written to) [^ ]+" "$log" | tail -1 | awk '{print $NF}' || true)
    echo "fuzz: $name FAILED (exit $status); the report is in $log" >&2
    grep -E "^(==[0-9]+==ERROR|SUMMARY|wallet: assertion failed|.*runtime error)" "$log" | head -5 >&2 || true
    if [[ -n $reproducer ]]; then
      echo "fuzz: reproducer: $reproducer" >&2
      echo "fuzz: replay it:  $build/fuzz/${name}_fuzz $reproducer" >&2
    fi
  fi
done

echo "fuzz: ${seconds}s per harness; libFuzzer's counts at the end of each run:"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
