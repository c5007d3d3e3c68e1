#!/usr/bin/env bash
# Every C source of the project is formatted as .clang-format says.
set -u
cd "$(dirname "$0")/../.."
command -v clang-format >/dev/null || { echo "SKIP: clang-format is not installed"; exit 77; }
mapfile -t files < <(git ls-files 'vmm/*.[ch]' 'devices/*.[ch]' 'irq/*.[ch]' 'tests/*.[ch]' 'guests/*.[ch]' 2>/dev/null)
[ ${#files[@]} -gt 0 ] || { echo "FAIL: no sources found (not a git checkout?)"; exit 1; }
if ! out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
  printf '%s\n' "$out" | grep -E 'error:' | head -20
  echo "FAIL: run: clang-format -i \$(git ls-files '*.[ch]')"
  exit 1
fi
echo "PASS: ${#files[@]} files formatted"
