#!/bin/bash
# sweep_dist.sh LRC — lrc sweep spread over processes (docs/distributed.md):
# a grid of 4 points (the tiny LLaMA, n_layers=1,2 x 2 rates: two arms) run
# alone is the reference table;
# - under mpirun -np 2 each rank runs its 2 points (p mod 2), whose lrc train
#   runs are plain processes (the launcher's variables scrubbed: a run that
#   kept them would join the job and hang), and rank 0 writes the same table,
#   byte for byte;
# - --slurm writes a job array of 4 tasks; its script run once per task
#   with SLURM_ARRAY_TASK_ID set, last point first (so that sweep.jsonl holds
#   them in reverse), then --gather, gives the same table; --gather before
#   every task finished names the missing point (exit 1);
# - the grid resumed under mpirun after 2 of its tasks runs the others only
#   and gives the same table;
# - --point beyond the grid, and --point under mpirun, are one line, exit 1.
lrc=$(realpath "$1")
source "$(dirname "$0")/../tools/check.sh"
command -v mpirun >/dev/null || { echo "FAIL mpirun not found: ./setup.sh --deps-only installs openmpi-bin"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# as train_dist.sh: Open MPI's memory, kept until exit, named for LeakSanitizer
export OMPI_MCA_mca_base_component_disable_dlclose=1 ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$(realpath "$(dirname "$0")/../tools/lsan_openmpi.supp")${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
mpi=(timeout 120 mpirun --oversubscribe -np 2)
cd "$dir" || exit 1
grid=(sweep llama --preset tiny --grid n_layers=1,2 --grid lr=3e-3,1e-2 --steps 10 --batch 4 --seq 32 --eval-every 10)
one_line() { [ "$(wc -l <"$1")" = 1 ] && grep -q "$2" "$1" || { cat "$1"; false; }; }

timeout 120 "$lrc" "${grid[@]}" -o alone >alone.out 2>&1
check "the sweep alone" "[ $? = 0 ] && [ \$(wc -l <alone/sweep.jsonl) = 4 ]"

# ---- mpirun -np 2 ----
"${mpi[@]}" "$lrc" "${grid[@]}" -o mpi >mpi.out 2>&1
check "mpirun -np 2: exits 0 ($(tail -n 2 mpi.out | tr '\n' ' '))" "[ $? = 0 ] && [ \$(wc -l <mpi/sweep.jsonl) = 4 ]"
check "mpirun -np 2: rank r runs points r and r + 2" \
  "[ \$(grep -c 'point [13] of 4, .*rank 0 of 2' mpi.out) = 2 ] && [ \$(grep -c 'point [24] of 4, .*rank 1 of 2' mpi.out) = 2 ]"
check "mpirun -np 2: rank 0 alone writes the table" "[ \$(grep -c '^| arm |' mpi.out) = 1 ]"
check "mpirun -np 2: the table of the sweep alone" "cmp alone/sweep.md mpi/sweep.md"

# ---- --slurm: the array's tasks one by one, then --gather ----
"$lrc" "${grid[@]}" -o sl --slurm >slurm.out 2>&1
check "--slurm writes the script and runs nothing" \
  "[ $? = 0 ] && grep -qx '#SBATCH --array=0-3' sl/sweep.sbatch && [ ! -e sl/sweep.jsonl ]"
for t in 3 2; do SLURM_ARRAY_TASK_ID=$t timeout 120 bash sl/sweep.sbatch >"task$t.out" 2>&1 || echo "FAIL task $t: $(tail -n 1 "task$t.out")"; done
cp -r sl half
"$lrc" "${grid[@]}" -o sl --gather >early.out 2>&1
check "--gather before every task: exit 1, the missing point named" "[ $? = 1 ] && one_line early.out 'point 0 (n_layers=1,lr=3e-3) is not in sweep.jsonl'"
for t in 1 0; do SLURM_ARRAY_TASK_ID=$t timeout 120 bash sl/sweep.sbatch >"task$t.out" 2>&1 || echo "FAIL task $t: $(tail -n 1 "task$t.out")"; done
alone_point() { [ "$(grep -c 'of 4' "task$1.out")" = 1 ] && grep -q "point $(($1 + 1)) of 4" "task$1.out" && ! grep -q '^| arm' "task$1.out"; }
check "each task ran its point alone, without a table" "alone_point 0 && alone_point 1 && alone_point 2 && alone_point 3"
"$lrc" "${grid[@]}" -o sl --gather >gather.out 2>&1
check "--gather: the table of the sweep alone (sweep.jsonl in reverse)" \
  "[ $? = 0 ] && [ \"\$(head -c 14 sl/sweep.jsonl)\" = '{\"run\":\"n_laye' ] && grep -q '^{\"run\":\"n_layers=2,lr=1e-2' sl/sweep.jsonl && cmp alone/sweep.md sl/sweep.md"

# ---- resumed under mpirun after two of the tasks ----
"${mpi[@]}" "$lrc" "${grid[@]}" -o half >half.out 2>&1
check "resumed under mpirun: exits 0" "[ $? = 0 ]"
check "resumed under mpirun: points 1 and 2 run, the others skipped" \
  "[ \$(grep -c 'of 4, ' half.out) = 2 ] && grep -q 'point 1 of 4' half.out && grep -q 'point 2 of 4' half.out && [ \$(grep -c 'already finished' half.out) = 2 ]"
check "resumed under mpirun: the table of the sweep alone" "cmp alone/sweep.md half/sweep.md"

# ---- bad input ----
"$lrc" "${grid[@]}" -o bad --point 4 >bad.out 2>&1
check "--point beyond the grid: exit 1, one line" "[ $? = 1 ] && one_line bad.out 'the grid has points 0 to 3'"
"${mpi[@]}" "$lrc" "${grid[@]}" -o bad --point 0 >badmpi.out 2>&1
check "--point under mpirun: exit 1" "[ $? != 0 ] && grep -q 'run as one process, not under mpirun' badmpi.out"
summary
