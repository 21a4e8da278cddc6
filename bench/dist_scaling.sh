#!/bin/bash
# dist_scaling.sh — data-parallel lrc train on this machine (docs/distributed.md):
# 2 ranks of 1 thread under mpirun against 1 process of 2 threads, the same
# model (LLaMA 60m, byte-level text), global batch and steps, interleaved in
# rounds (one process, 2 ranks, one process, ...). Prints each side's median
# tokens/s (the steps after the first two of each run), their ratio, and the
# 2-rank runs' all-reduce share of the step (allreduce_s in metrics.jsonl
# against the step's time). Then a prediction for NODES machines (8) of this
# kind, one rank each, joined by a network of GBPS gigabits/s (10 and 100):
# a ring all-reduce moves 2 (N - 1) / N times the gradients' bytes (4 a
# parameter, lrc inspect --params) through each node's link, not overlapped
# with the step (lrc sums after the backward), so a step takes the 2-rank
# run's compute (its step less its all-reduce) plus that transfer; printed
# as the step's all-reduce share and the scaling efficiency against
# perfect.
#   bench/dist_scaling.sh
# Environment: LRC (default build/lrc), STEPS (12), ROUNDS (3), BATCH (8, the
# global batch), SEQ (256), PRESET (60m), NODES (8), GBPS ("10 100").
set -euo pipefail
cd "$(dirname "$0")/.."
lrc=${LRC:-build/lrc}
steps=${STEPS:-12} rounds=${ROUNDS:-3} batch=${BATCH:-8} seq=${SEQ:-256} preset=${PRESET:-60m}
nodes=${NODES:-8} gbps=${GBPS:-10 100}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(llama --preset "$preset" --steps "$steps" --lr 1e-3 --seq "$seq" --eval-every "$steps")
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "llama --preset $preset, global batch $batch x $seq, $steps steps a run, $rounds rounds"
for r in $(seq 1 "$rounds"); do
  "$lrc" train "${common[@]}" --batch $((batch / 2)) --accum 2 --threads 2 -o "$dir/one-$r" >/dev/null
  mpirun --oversubscribe -np 2 "$lrc" train "${common[@]}" --batch "$batch" --threads 1 -o "$dir/two-$r" >/dev/null
done
params=$("$lrc" inspect llama --preset "$preset" --params | awk '$1 == "total" { print $2 }')
/usr/bin/python3 - "$dir" "$rounds" "$batch" "$seq" "$params" "$nodes" "$gbps" <<'EOF'
import json, statistics, sys
d, rounds, batch, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
params, nodes, rates = int(sys.argv[5]), int(sys.argv[6]), [float(x) for x in sys.argv[7].split()]
def steps(run):
    return [json.loads(l) for l in open(f"{d}/{run}/metrics.jsonl")][2:]
one = [s["tokens_per_s"] for r in range(1, rounds + 1) for s in steps(f"one-{r}")]
two_steps = [s for r in range(1, rounds + 1) for s in steps(f"two-{r}")]
two = [s["tokens_per_s"] for s in two_steps]
share = [s["allreduce_s"] / (batch * seq / s["tokens_per_s"]) for s in two_steps]
a, b = statistics.median(one), statistics.median(two)
print(f"1 process of 2 threads (--accum 2): {a:10.0f} tokens/s (median of {len(one)} steps)")
print(f"2 ranks of 1 thread (mpirun):       {b:10.0f} tokens/s (median of {len(two)} steps)")
print(f"ratio 2 ranks / 1 process: {b / a:.3f}")
print(f"all-reduce share of a 2-rank step: {100 * statistics.median(share):.1f}% (median)")
step = statistics.median(batch * seq / s["tokens_per_s"] for s in two_steps)
compute = step - statistics.median(s["allreduce_s"] for s in two_steps)
grad_bytes = 4 * params
moved = 2 * (nodes - 1) / nodes * grad_bytes
print(f"prediction, {nodes} nodes of this kind, a rank each: gradients {grad_bytes / 1e6:.1f} MB ({params} parameters), "
      f"a ring all-reduce moves {moved / 1e6:.1f} MB through each link; compute {compute * 1e3:.0f} ms a step "
      f"(the 2-rank step less its all-reduce)")
for g in rates:
    t = moved / (g * 1e9 / 8)
    print(f"  at {g:g} Gbit/s: all-reduce {t * 1e3:.0f} ms, {100 * t / (compute + t):.1f}% of the step, "
          f"scaling efficiency {compute / (compute + t):.2f} ({nodes * compute / (compute + t):.1f}x one node's tokens/s)")
EOF
