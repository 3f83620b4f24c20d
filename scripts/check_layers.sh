#!/usr/bin/env bash
# The layer check: every #include "FOLDER/..." in a source file must point into the file's own
# top-level folder or into one that scripts/layers.txt allows for it; an include that points
# upward or sideways fails, naming the file, the line and what its layer may include.
#
#   scripts/check_layers.sh [--root DIR]   (default: the repository; DIR: a tree laid out the same)
# Exit status 0 when clean, 1 on a violation (or a folder with sources that the table lacks).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
table=$here/layers.txt
if [ "${1:-}" = "--root" ]; then
  root=$(cd "$2" && pwd) || exit 2
fi

declare -A allowed
while read -r layer rest; do
  case "$layer" in ''|'#'*) continue ;; esac
  rest=${rest%%#*}
  allowed[$layer]=" $(echo $rest) "  # the entries, one space apart
done < "$table"

violations=0
checked=0
while IFS= read -r -d '' file; do
  rel=${file#"$root"/}
  layer=${rel%%/*}
  [ "$layer" = "$rel" ] && continue  # a file at the top level
  case "$layer" in build*|.*|shared|docs|experiments|scripts|tools) continue ;; esac
  if [ -z "${allowed[$layer]+set}" ]; then
    echo "$rel: the folder '$layer' is not in scripts/layers.txt; add its line (what it may include)"
    violations=$((violations + 1))
    continue
  fi
  checked=$((checked + 1))
  while IFS=: read -r line target; do
    folder=${target%%/*}
    [ "$folder" = "$layer" ] && continue
    if [[ "${allowed[$layer]}" == *" $folder "* || "${allowed[$layer]}" == *" $target "* ]]; then continue; fi
    echo "$rel:$line: includes \"$target\", but $layer/ may include only:${allowed[$layer]}(scripts/layers.txt)"
    violations=$((violations + 1))
  done < <(grep -noE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[A-Za-z0-9_]+/[^"]+"' "$file" |
           sed -E 's/^([0-9]+):.*"([^"]+)"$/\1:\2/')
done < <(find "$root" \( -name build -o -name 'build-*' -o -name .git -o -name shared \) -prune -o \
           -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)

if [ "$violations" -gt 0 ]; then
  echo "layer check: $violations include(s) against the layers, in $checked files"
  exit 1
fi
echo "layer check: $checked files, every include within its layer's allowance"
