#!/bin/bash
# readme_lists.sh [REPO] — every folder of the repository has a README.md
# that names each of its files and sub-folders. A folder under
# tests/fixtures/ holds only what a generator wrote (the fixture checks
# compare its file set, and tests/CMakeLists.txt makes a test of each entry),
# so one without a README.md is described by the nearest README.md above
# it, which must name the folder and each of its files. The files are git's
# (tracked, or new and not ignored). Prints one line per name missing, then
# a summary; exits 1 when anything is missing.
set -u
cd "${1:-$(dirname "$0")/../..}" || exit 2
missing=0 folders=0
names_in() { # README NAME...: print each NAME that README does not name as
  # a word of its own (graph.c inside cuemu_graph.c does not count)
  local readme=$1; shift
  local n re
  for n in "$@"; do
    re=$(printf '%s' "$n" | sed 's/[][\\.^$*+?(){}|/]/\\&/g')
    grep -qE -- "(^|[^A-Za-z0-9_.-])$re(\$|[^A-Za-z0-9_-])" "$readme" || echo "$n"
  done
}
mapfile -t files < <(git ls-files --cached --others --exclude-standard | sort -u)
mapfile -t dirs < <(printf '%s\n' "${files[@]}" | sed -n 's|/[^/]*$||p' |
  awk -F/ '{p=$1; print p; for (i = 2; i <= NF; i++) { p = p "/" $i; print p }}' | sort -u)
dirs=(. "${dirs[@]}")
for d in "${dirs[@]}"; do
  readme=$d/README.md
  # a data folder of tests/fixtures: the nearest README above lists it
  prefix=""
  if [[ $d == tests/fixtures/* && ! -e $readme ]]; then
    up=${d%/*}
    while [ ! -e "$up/README.md" ] && [[ $up == */* ]]; do up=${up%/*}; done
    readme=$up/README.md
    prefix="${d##*/}/"
  fi
  folders=$((folders + 1))
  if [ ! -e "$readme" ]; then
    echo "$d: no README.md"; missing=$((missing + 1)); continue
  fi
  # the entries right below d: files and folders, README.md itself excepted
  base=${d#./}; [ "$d" = . ] && base=""
  mapfile -t entries < <(printf '%s\n' "${files[@]}" |
    awk -v b="$base" 'BEGIN { n = length(b) }
      { if (n) { if (substr($0, 1, n + 1) != b "/") next; r = substr($0, n + 2) } else r = $0
        i = index(r, "/"); print (i ? substr(r, 1, i - 1) : r) }' | sort -u |
    grep -vx 'README.md')
  [ -n "$prefix" ] && entries=("${prefix%/}" "${entries[@]}")
  while IFS= read -r n; do
    [ -n "$n" ] || continue
    echo "$readme: does not name $n"; missing=$((missing + 1))
  done < <(names_in "$readme" "${entries[@]}")
done
echo "$folders folders, $missing names missing"
[ "$missing" = 0 ]
