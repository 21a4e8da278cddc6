#!/bin/bash
# arch_scale.sh LRC MODEL — a model whose recurrence over time is IR (lrc.scan,
# DESIGN.md rule 5) builds a graph of one size at every sequence length: the
# nodes of the built graph and of the training graph (`lrc inspect --ir`,
# `--after autodiff`) and the kernels (`--kernels`) at T = 64 and T = 1024,
# batch 2, are equal in number. A recurrence unrolled over the sequence, or
# a pass that grows the graph with it, fails here.
set -u
lrc=$1 model=$2
count() { # T, then inspect's options: the lines that name a node or a kernel
  local T=$1
  shift
  "$lrc" inspect "$model" "$@" --batch 2 --seq "$T" | grep -cE '^(%|kernel )'
}
bad=0
for what in "--ir" "--ir --after autodiff" "--kernels"; do
  # shellcheck disable=SC2086 # the options split into words
  a=$(count 64 $what) b=$(count 1024 $what)
  echo "inspect $what: $a at T = 64, $b at T = 1024"
  if [ "$a" -le 0 ] || [ "$a" != "$b" ]; then
    echo "FAIL: inspect $what counts $a at T = 64 and $b at T = 1024"
    bad=1
  fi
done
exit $bad
