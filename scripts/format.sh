#!/usr/bin/env bash
# The layout of the C++ sources (.clang-format), with the clang-format that install-deps.sh puts
# in place (clang-format-14, so that every machine formats alike).
#   scripts/format.sh          rewrites every tracked .cpp and .hpp
#   scripts/format.sh --check  changes nothing; lists the files that differ and fails if any does
set -euo pipefail
cd "$(dirname "$0")/.."

formatter=$(command -v clang-format-14 || true)
if [[ -z $formatter ]]; then
  echo "format: clang-format-14 is missing (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')

if [[ ${1:-} == --check ]]; then
  differing=()
  for f in "${files[@]}"; do
    if ! "$formatter" --dry-run --Werror "$f" >/dev/null 2>&1; then differing+=("$f"); fi
  done
  if ((${#differing[@]} > 0)); then
    echo "format: ${#differing[@]} files differ from .clang-format (run scripts/format.sh):" >&2
    printf '  %s\n' "${differing[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files match .clang-format"
  exit 0
fi
"$formatter" -i "${files[@]}"
