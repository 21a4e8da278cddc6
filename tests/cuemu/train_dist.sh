#!/bin/bash
# train_dist.sh LRC LLAMA ST_COMPARE — lrc train --target cuda on 2 MPI
# ranks (the host emulator, one per rank), the gradients summed over the
# ranks through the host: 2 ranks of --batch 8 against one process of
# --batch 4 --accum 2 (the tiny LLaMA, 4 steps), every weight within 1e-5
# relative per tensor and each step's loss within 1e-5; --zero 1 (the cpu's
# AdamW) with --target cuda is one line, exit 1.
set -u
lrc=$(realpath "$1") llama=$(realpath "$2") compare=$(realpath "$3")
command -v mpirun >/dev/null || { echo "FAIL mpirun not found: ./setup.sh --deps-only installs openmpi-bin"; exit 1; }
# as tests/cli/train_dist.sh: Open MPI as root, and LeakSanitizer told of Open MPI's own memory
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_disable_dlclose=1 ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$(realpath "$(dirname "$0")/../tools/lsan_openmpi.supp")${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi; }
for i in $(seq 1 120); do
  echo "In the beginning God created the heaven and the earth. And the earth was without form, and void."
done >text.txt
args=(train "$llama" --preset tiny --steps 4 --lr 3e-3 --seq 16 --eval-every 2 --data text.txt --threads 1 --target cuda)
timeout 300 "$lrc" "${args[@]}" --batch 4 --accum 2 -o one >one.out 2>&1
check "one process, --accum 2, exits 0 ($(tail -1 one.out))" "[ $? = 0 ]"
timeout 300 mpirun --oversubscribe -np 2 "$lrc" "${args[@]}" --batch 8 -o two >two.out 2>&1
check "2 ranks exit 0 ($(tail -1 two.out))" "[ $? = 0 ]"
check "2 ranks on cuda: every weight within 1e-5 of one process with --accum 2" \
  "'$compare' one/model.safetensors two/model.safetensors '*' 1e-5"
check "2 ranks on cuda: each step's loss within 1e-5 of one process's" "/usr/bin/python3 - one/metrics.jsonl two/metrics.jsonl <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
worst = max(abs(x[k] - y[k]) / abs(y[k]) for x, y in zip(a, b) for k in ('train_loss', 'val_loss') if k in y)
print('losses of %d steps: worst relative difference %.1e' % (len(a), worst))
sys.exit(0 if len(a) == len(b) == 4 and worst <= 1e-5 else 1)
PY"
timeout 120 mpirun --oversubscribe -np 2 "$lrc" "${args[@]}" --batch 8 --zero 1 -o zero >zero.out 2>&1
s=$?
check "--zero 1 with --target cuda: exit 1 (status $s)" "[ $s = 1 ]"
check "--zero 1 with --target cuda: one line naming it ($(grep -m1 zero zero.out))" \
  "grep -q '^lrc: --zero 1 shards the cpu' zero.out && [ ! -e zero ]"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
