#!/bin/bash
# train_dist.sh LRC LLAMA PARCAE ST_COMPARE TEST_DIST — data-parallel lrc train
# under mpirun (docs/distributed.md), 1 thread a rank: 2 ranks of --batch 8
# against one process of --batch 4 --accum 2 (the small LLaMA and Parcae at
# their tiny presets, 20 steps): every weight within 1e-6 relative per
# tensor and the losses of every step within 1e-6; a run stopped at step 10
# and resumed at another rank count (2 -> 1, 1 -> 2) ends with the same
# weights; mpirun -np 1 gives the bytes of one process without it. Bad
# input is one line naming it, exit 1, and no run directory left: a rank
# count that does not divide the batch or the step's micro-batches, ranks
# whose options or models differ, libmpi that cannot be loaded; a rank killed mid-run
# stops the other within 10 s, and the last checkpoint resumes; SIGINT to one
# rank stops all after the same step with rank 0's checkpoint. --zero 1
# (AdamW's moments sharded) gives the weights and losses of 2 ranks without
# it within 1e-6 with each rank's optimizer state half (the bytes each rank
# prints), and the tiny LLaMA's resumes use it (2 ranks with --zero 1 ->
# one process, one process -> 2 ranks with --zero 1); --zero 1 without
# mpirun is one line, exit 1. Then
# runtime/dist.c's unit test on 2 ranks.
set -u
lrc=$(realpath "$1") llama=$(realpath "$2") parcae=$(realpath "$3") compare=$4 test_dist=$5 # -wdir below: whole paths
command -v mpirun >/dev/null || { echo "FAIL mpirun not found: ./setup.sh --deps-only installs openmpi-bin"; exit 1; }
# Open MPI refuses root without these (CI runs as root), and counts cores, not threads
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the sanitized build: Open MPI keeps its memory until exit, and its
# components stay loaded (no dlclose) with whole stacks, so that
# LeakSanitizer names the libraries those allocations come from and skips
# them, and still reports lrc's
export OMPI_MCA_mca_base_component_disable_dlclose=1 ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$(realpath "$(dirname "$0")/../tools/lsan_openmpi.supp")${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
mpi=(mpirun --oversubscribe)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi; }
run() {
  local what=$1
  shift
  timeout 120 "$@" >"$dir/run.out" 2>"$dir/run.err"
  local s=$?
  check "$what exits 0 (status $s: $(head -c 300 "$dir/run.err"))" "[ $s = 0 ]"
}
for i in $(seq 1 120); do
  echo "In the beginning God created the heaven and the earth. And the earth was without form, and void."
done >"$dir/text.txt"
# every step's train_loss and each val_loss of two runs' metrics.jsonl within 1e-6
losses_match() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
bad = [(x["step"], k) for x, y in zip(a, b) for k in ("train_loss", "val_loss")
       if (k in x) != (k in y) or (k in x and abs(x[k] - y[k]) > 1e-6 * max(1, abs(y[k])))]
sys.exit(1 if len(a) != len(b) or len(a) == 0 or bad else 0)
EOF
}
same_weights() { "$compare" "$1/model.safetensors" "$2/model.safetensors" '*' 1e-6 >/dev/null; }

for m in llama parcae; do
  model=${!m}
  args=(--preset tiny --steps 20 --lr 3e-3 --seq 16 --eval-every 5 --data "$dir/text.txt" --threads 1)
  run "$m: one process, --accum 2" "$lrc" train "$model" "${args[@]}" --batch 4 --accum 2 -o "$dir/$m-acc"
  run "$m: 2 ranks" "${mpi[@]}" -np 2 "$lrc" train "$model" "${args[@]}" --batch 8 -o "$dir/$m-np2"
  cp "$dir/run.out" "$dir/$m-np2.out"
  run "$m: 2 ranks, --zero 1" "${mpi[@]}" -np 2 "$lrc" train "$model" "${args[@]}" --batch 8 --zero 1 -o "$dir/$m-zero"
  check "$m: --zero 1 gives the weights of 2 ranks without it within 1e-6" "same_weights '$dir/$m-zero' '$dir/$m-np2'"
  check "$m: --zero 1 gives every step's losses within 1e-6" "losses_match '$dir/$m-zero/metrics.jsonl' '$dir/$m-np2/metrics.jsonl'"
  # "optimizer state ... in bytes: R0 R1": each rank's half of one rank's without --zero (shards differ by one element at most)
  read -r w0 w1 <<<"$(sed -n 's/^optimizer state.*in bytes: //p' "$dir/$m-np2.out")"
  read -r z0 z1 <<<"$(sed -n 's/^optimizer state.*in bytes: //p' "$dir/run.out")"
  check "$m: --zero 1 halves each rank's optimizer state (measured: $z0 and $z1 bytes against $w0 and $w1)" \
    "[ -n '$w0' ] && [ '$w0' = '$w1' ] && [ -n '$z1' ] && [ \$(($z0 + $z1)) = $w0 ] && [ \$((2 * $z0 - $w0)) -le 8 ] && [ \$(($w0 - 2 * $z1)) -le 8 ]"
  check "$m: 2 ranks give the weights of --accum 2 within 1e-6" "same_weights '$dir/$m-np2' '$dir/$m-acc'"
  check "$m: 2 ranks give every step's losses of --accum 2 within 1e-6" "losses_match '$dir/$m-np2/metrics.jsonl' '$dir/$m-acc/metrics.jsonl'"
  check "$m: the progress reports the all-reduce" "grep -q '\"allreduce_s\":' '$dir/$m-np2/metrics.jsonl'"
  # resumed at another rank count: 2 -> 1 and 1 -> 2
  zero=()
  [ $m = llama ] && zero=(--zero 1)
  run "$m: 2 ranks ${zero[*]} stopped at 10" "${mpi[@]}" -np 2 "$lrc" train "$model" "${args[@]}" --batch 8 --stop-after 10 "${zero[@]}" -o "$dir/$m-21"
  run "$m: ... resumed by one process" "$lrc" train --resume "$dir/$m-21" --threads 1
  run "$m: one process stopped at 10" "$lrc" train "$model" "${args[@]}" --batch 4 --accum 2 --stop-after 10 -o "$dir/$m-12"
  zero=() # LLaMA's resumes shard the moments (--zero 1): 2 ranks stopped at 10 with them, 2 ranks resuming with them
  [ $m = llama ] && zero=(--zero 1)
  run "$m: ... resumed by 2 ranks ${zero[*]}" "${mpi[@]}" -np 2 "$lrc" train --resume "$dir/$m-12" --threads 1 "${zero[@]}"
  check "$m: resumed 2 -> 1, the same weights within 1e-6" "same_weights '$dir/$m-21' '$dir/$m-acc'"
  check "$m: resumed 1 -> 2, the same weights within 1e-6" "same_weights '$dir/$m-12' '$dir/$m-acc'"
done

# one rank under mpirun: the bytes of one process without it
short=(--preset tiny --steps 6 --lr 3e-3 --seq 16 --eval-every 3 --data "$dir/text.txt" --threads 1)
args=("${short[@]}" --batch 4)
run "one process" "$lrc" train "$llama" "${args[@]}" -o "$dir/one"
run "mpirun -np 1" "${mpi[@]}" -np 1 "$lrc" train "$llama" "${args[@]}" -o "$dir/np1"
check "mpirun -np 1: the checkpoint of one process, bit for bit" "cmp -s '$dir/one/checkpoint.safetensors' '$dir/np1/checkpoint.safetensors'"

# bad input: one line of lrc's naming it (mpirun adds its own notice), exit 1
refused() { # NAME PATTERN RUN_DIR COMMAND...
  local what=$1 pattern=$2 out=$3
  shift 3
  timeout 120 "$@" >/dev/null 2>"$dir/err"
  local s=$?
  check "$what: exit 1 (status $s)" "[ $s = 1 ]"
  check "$what: one line naming it ($(grep '^lrc' "$dir/err" | head -c 300 || true); stderr: $(head -c 600 "$dir/err"))" \
    "[ \$(grep -c '^lrc' '$dir/err') = 1 ] && grep -q '^lrc: $pattern' '$dir/err'"
  [ -n "$out" ] && check "$what: no run directory left" "[ ! -e '$out' ]"
}
refused "--zero 1 without mpirun" "--zero 1 shards AdamW.s moments over MPI ranks: start lrc train with mpirun" "$dir/z" \
  "$lrc" train "$llama" "${args[@]}" --zero 1 -o "$dir/z"
refused "--batch 6 over 4 ranks" "--batch 6 cannot be split over 4 ranks" "$dir/b6" \
  "${mpi[@]}" -np 4 "$lrc" train "$llama" "${short[@]}" --batch 6 -o "$dir/b6"
refused "ranks with different options" "rank 1.s options differ from rank 0.s" "$dir/opts" \
  "${mpi[@]}" -np 1 "$lrc" train "$llama" "${args[@]}" -o "$dir/opts" : -np 1 "$lrc" train "$llama" "${args[@]}" --lr 1e-3 -o "$dir/opts"
# the same options, but each rank's working directory holds another m.lua
mkdir -p "$dir/w0" "$dir/w1"
cp "$llama" "$dir/w0/m.lua"
sed 's/d_ff = 88/d_ff = 96/' "$llama" >"$dir/w1/m.lua"
check "the second m.lua differs" "! cmp -s '$dir/w0/m.lua' '$dir/w1/m.lua'"
refused "ranks with different models" "rank 1.s model differs from rank 0.s" "$dir/models" \
  "${mpi[@]}" -np 1 -wdir "$dir/w0" "$lrc" train m.lua "${args[@]}" -o "$dir/models" : -np 1 -wdir "$dir/w1" "$lrc" train m.lua "${args[@]}" -o "$dir/models"
refused "a step of 2 micro-batches resumed by 4 ranks" ".*llama-acc: a step of 2 micro-batches .* cannot be shared by 4 ranks" "" \
  "${mpi[@]}" -np 4 "$lrc" train --resume "$dir/llama-acc" --threads 1
refused "libmpi not loadable" "an MPI launcher started this process (OMPI_COMM_WORLD_SIZE is set) but /nonexistent/libmpi.so cannot be loaded" \
  "$dir/nolib" env OMPI_COMM_WORLD_SIZE=2 LRC_MPI_LIB=/nonexistent/libmpi.so "$lrc" train "$llama" "${args[@]}" -o "$dir/nolib"

# signal_rank SIG OUT: a long run of 2 ranks that evaluates every EVERY steps,
# SIG sent to rank 1 after 5 steps; sets t (ms from the signal to mpirun's
# end), s (its status) and victim (rank 1's pid); its output in OUT.log
signal_rank() {
  local sig=$1 out=$2
  timeout 120 "${mpi[@]}" -np 2 "$lrc" train "$llama" --preset tiny --steps 1000000 --lr 1e-3 --seq 16 --eval-every "$every" \
    --data "$dir/text.txt" --threads 1 --batch 4 -o "$out" >"$out.log" 2>&1 &
  local job=$! p
  for i in $(seq 1 600); do [ "$(cat "$out/metrics.jsonl" 2>/dev/null | wc -l)" -ge 5 ] && break; sleep 0.1; done
  victim=
  for p in $(pgrep -P "$(pgrep -P $job -x mpirun || echo $job)" -x lrc) $(pgrep -P $job -x lrc); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$p
  done
  check "$sig: the run under mpirun took 5 steps, and rank 1 is found (pid '$victim')" "[ -n '$victim' ]"
  local t0=$(date +%s%N)
  [ -n "$victim" ] && kill -"$sig" "$victim"
  wait $job
  s=$? t=$((($(date +%s%N) - t0) / 1000000))
}
resumes() { # RUN_DIR PATTERN: its checkpoint loads, at the step PATTERN matches
  timeout 120 "$lrc" train --resume "$1" --threads 1 --stop-after 1 >"$1.resumed" 2>&1
  local s=$?
  check "$1's checkpoint loads (status $s: $(tail -c 300 "$1.resumed"))" "[ $s = 0 ] && grep -q '^trained to step $2 of 1000000' '$1.resumed'"
}
# a rank killed mid-run: mpirun ends the other within 10 s, and the last checkpoint resumes
every=2
signal_rank KILL "$dir/kill"
echo "a killed rank: mpirun ended the run in $t ms (status $s)"
check "a killed rank ends the run within 10 s ($t ms), not 0 (status $s)" "[ $t -le 10000 ] && [ $s != 0 ] && [ $s != 124 ]"
resumes "$dir/kill" "[1-9][0-9]*"
# Ctrl-C of one rank: every rank stops after the same step, and rank 0 writes its checkpoint
every=1000000
signal_rank INT "$dir/int"
n=$(tr '\r' '\n' <"$dir/int.log" | sed -n 's/^interrupted after step \([0-9]*\);.*/\1/p')
check "SIGINT to rank 1: status 130 ($s), rank 0 says where it stopped ('$n')" "[ $s = 130 ] && [ -n '$n' ]"
resumes "$dir/int" "${n:-none}"

# runtime/dist.c alone
"${mpi[@]}" -np 2 "$test_dist" >"$dir/unit" 2>&1
s=$?
cat "$dir/unit" | grep -E 'passed|FAIL'
check "test_dist on 2 ranks (status $s)" "[ $s = 0 ] && [ \$(grep -c ' 0 failed' '$dir/unit') = 2 ]"

echo "$passed passed, $failed failed"
[ $failed = 0 ]
