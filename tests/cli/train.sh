#!/bin/bash
# train.sh LRC MODEL ST_COMPARE — lrc train end to end on a small text: the validation
# loss falls, and a run stopped with --stop-after then continued with
# --resume ends with a checkpoint byte-identical to the uninterrupted run's
# (weights, optimizer state, step, random state); LayerRoPE's scalars in
# metrics.jsonl at each evaluation; AdamW's first step
# against its closed form (decay, clipping), --accum and its resume, and a
# ViT that learns Fashion-MNIST, its test accuracy counted independently.
set -u
lrc=$1 model=$2 compare=$3
tc="/usr/bin/python3 $(dirname "$0")/train_check.py"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi; }
# a run that should succeed: its exit status is a check of its own, so a
# failed run never passes a check that reads (or misses) its files
run() {
  local what=$1
  shift
  "$@" >/dev/null
  local s=$?
  check "$what exits 0 (status $s)" "[ $s = 0 ]"
}
for i in $(seq 1 120); do
  echo "In the beginning God created the heaven and the earth. And the earth was without form, and void."
done >"$dir/text.txt"
args=(--preset tiny --steps 20 --lr 3e-3 --batch 4 --seq 32 --eval-every 5 --data "$dir/text.txt" --threads 2)
run "full run" "$lrc" train "$model" "${args[@]}" -o "$dir/full"
run "run stopped after 10" "$lrc" train "$model" "${args[@]}" -o "$dir/part" --stop-after 10
check "stopped run at step 10" "grep -q '\"step\":10,' '$dir/part/metrics.jsonl' && ! grep -q '\"step\":11,' '$dir/part/metrics.jsonl'"
# the LM head's loss fused into its GEMM (LRC_CPU_LOSS_HEAD=1, fuse rule 8) trains bit for bit as the unfused kernels
LRC_CPU_LOSS_HEAD=1 run "full run, loss in the head's GEMM" "$lrc" train "$model" "${args[@]}" -o "$dir/fused"
check "the loss fused into the head: the same weights, bit for bit" "cmp -s '$dir/full/model.safetensors' '$dir/fused/model.safetensors'"
# the checkpoint's format (docs/formats.md): version 1, the same tensors
# without the metadata (what lrc wrote before it had one), resumes as
# version 2 does; a newer version, another kind of file or damaged contents
# are one line naming the file, exit 1, and the run directory as it was
st="/usr/bin/python3 $(dirname "$0")/../tools/st.py"
stpy() { /usr/bin/python3 -c "import sys; sys.path.insert(0, '$(dirname "$0")/../tools'); import st; h, d = st.read(sys.argv[1]); $1; st.write(sys.argv[1], h, d)" "$2"; }
check "a checkpoint says its format and version" \
  "/usr/bin/python3 -c \"import sys; sys.path.insert(0, '$(dirname "$0")/../tools'); import st; m = st.read('$dir/part/checkpoint.safetensors')[0]['__metadata__']; sys.exit(m != {'format': 'lrc-checkpoint', 'version': '2'})\""
for k in v1 v99 fmt moment step; do cp -r "$dir/part" "$dir/part_$k"; done
stpy "h.pop('__metadata__')" "$dir/part_v1/checkpoint.safetensors"
stpy "h['__metadata__']['version'] = '99'" "$dir/part_v99/checkpoint.safetensors"
stpy "h['__metadata__']['format'] = 'lrc'" "$dir/part_fmt/checkpoint.safetensors"
$st set "$dir/part/checkpoint.safetensors" "$dir/part_moment/checkpoint.safetensors" adam.m/model.norm.weight F32 '[3]'
$st set "$dir/part/checkpoint.safetensors" "$dir/part_step/checkpoint.safetensors" train.step F32 '[1]'
run "a version 1 checkpoint resumed" "$lrc" train --resume "$dir/part_v1" --threads 2
check "a version 1 checkpoint resumes bit for bit (and is written as version 2)" \
  "cmp -s '$dir/full/checkpoint.safetensors' '$dir/part_v1/checkpoint.safetensors'"
refused() { # NAME WHAT PATTERN
  cp "$dir/$1/checkpoint.safetensors" "$dir/$1.before"
  "$lrc" train --resume "$dir/$1" --threads 2 >/dev/null 2>"$dir/$1.err"
  local s=$?
  check "$2: exit 1 (status $s)" "[ $s = 1 ]"
  check "$2: one line naming the file ($(head -c 300 "$dir/$1.err"))" \
    "[ \$(wc -l <'$dir/$1.err') = 1 ] && grep -q '$1/checkpoint\\.safetensors: .*$3' '$dir/$1.err'"
  check "$2: the checkpoint is left as it was" "cmp -s '$dir/$1.before' '$dir/$1/checkpoint.safetensors'"
}
refused part_v99 "a checkpoint of format version 99" "version 99.*reads versions 1 to 2"
refused part_fmt "a safetensors file of another format" "not an lrc training checkpoint"
refused part_moment "a moment of the wrong shape" "adam\\.m/model\\.norm\\.weight. is F32 \\[3\\]"
refused part_step "a train.step of the wrong type" "damaged checkpoint"
# a run.json whose eval_every is 0 (the loop divides by it): refused in one line
cp -r "$dir/part" "$dir/part_ev0"
sed -i 's/"eval_every":[[:space:]]*[0-9]*/"eval_every": 0/' "$dir/part_ev0/run.json"
"$lrc" train --resume "$dir/part_ev0" --threads 2 >/dev/null 2>"$dir/ev0.err"
ev0=$?
check "run.json with eval_every 0: exit 1, one line naming it ($(head -c 200 "$dir/ev0.err"))" \
  "[ $ev0 = 1 ] && [ \$(wc -l <'$dir/ev0.err') = 1 ] && grep -q 'part_ev0/run.json: damaged (eval_every 0)' '$dir/ev0.err'"
run "resumed run" "$lrc" train --resume "$dir/part" --threads 2
check "resumed run is bit-identical" "cmp -s '$dir/full/checkpoint.safetensors' '$dir/part/checkpoint.safetensors'"
first=$(grep -o '"val_loss":[0-9.]*' "$dir/full/metrics.jsonl" | head -1 | cut -d: -f2)
last=$(grep -o '"val_loss":[0-9.]*' "$dir/full/metrics.jsonl" | tail -1 | cut -d: -f2)
echo "validation loss: $first at step 5, $last at step 20"
check "validation loss falls" "awk 'BEGIN { exit !($last < $first - 0.5) }'"
check "20 metric lines" "[ \$(wc -l <'$dir/full/metrics.jsonl') = 20 ]"
# Ctrl-C: the step in flight ends, a checkpoint is written, exit status 130; --resume finishes the run
"$lrc" train "$model" --preset tiny --steps 100000 --lr 1e-3 --batch 4 --seq 32 --eval-every 1000 \
  --data "$dir/text.txt" --threads 2 -o "$dir/int" >/dev/null 2>&1 &
pid=$!
# the first metrics line means the handler is installed (a SIGINT before
# it is lost: a shell's background jobs ignore SIGINT); compiling takes
# seconds, more on a loaded machine, so wait up to 2 minutes for it
for i in $(seq 1 1200); do [ -s "$dir/int/metrics.jsonl" ] && break; sleep 0.1; done
check "the run to interrupt writes its first metrics" "[ -s '$dir/int/metrics.jsonl' ]"
[ -s "$dir/int/metrics.jsonl" ] || kill -TERM $pid
kill -INT $pid
wait $pid
status=$?
check "Ctrl-C exits with 130" "[ $status = 130 ]"
check "Ctrl-C writes a checkpoint" "[ -s '$dir/int/checkpoint.safetensors' ]"
"$lrc" train --resume "$dir/int" --stop-after "$(($(wc -l <"$dir/int/metrics.jsonl") + 2))" --threads 2 >/dev/null
resumed=$?
check "an interrupted run resumes" "[ $resumed = 0 ] && [ -s '$dir/int/model.safetensors' ]"
# LRC_PROFILE: a line per launch of the step on stderr (time a call, share
# of the total), the largest share first
LRC_PROFILE=1 run "LRC_PROFILE run" "$lrc" train "$model" "${args[@]}" --steps 2 --eval-every 2 -o "$dir/prof" 2>"$dir/prof.txt"
grep ' ms .*GFLOP/s' "$dir/prof.txt" | awk '{print $3 + 0}' >"$dir/prof_share.txt"
check "LRC_PROFILE: a line per launch, the largest share first" \
  "[ \$(wc -l <'$dir/prof_share.txt') -gt 20 ] && sort -g -r -s '$dir/prof_share.txt' | cmp -s - '$dir/prof_share.txt'"
# then the step (the first left out), split; the pool's busy share; the FLOP rate against the FMA
# probe (bench/cpu_train.py's ceiling line reads the last one's GFLOP and probe)
check "LRC_PROFILE: the step's split, the threads' busy share and the step's share of the FMA peak" \
  "grep -qE '^a step \(the mean of 1 after the first\): [0-9.]+ ms, of which the graph [0-9.]+ ms, the gradient check [0-9.]+ ms, AdamW [0-9.]+ ms\$' '$dir/prof.txt' &&
   grep -qE '^the 2 threads were busy [0-9.]+% of the pool.s runs \(idle [0-9.]+%\)\$' '$dir/prof.txt' &&
   grep -qE '^[0-9.]+ GFLOP a step at [0-9.]+ GFLOP/s: [0-9.]+% of the FMA peak, [0-9.]+ GFLOP/s measured now\$' '$dir/prof.txt'"
# --accum 2 of batches of 2 draws the same windows as one batch of 4: the
# same loss and gradient norm at step 1 (up to f32 summation order); an
# --accum run stopped and resumed ends bit-identical to the uninterrupted one
one=(--preset tiny --steps 1 --lr 3e-3 --seq 32 --data "$dir/text.txt" --threads 2)
acc=("${one[@]}" --steps 4 --eval-every 2 --batch 2 --accum 2)
run "batch 4" "$lrc" train "$model" "${one[@]}" --batch 4 -o "$dir/b4"
run "accum 2" "$lrc" train "$model" "${acc[@]}" -o "$dir/acc"
run "accum 2 stopped after 2" "$lrc" train "$model" "${acc[@]}" --stop-after 2 -o "$dir/acc_part"
run "accum 2 resumed" "$lrc" train --resume "$dir/acc_part" --threads 2
check "--accum: the resumed run is bit-identical" "cmp -s '$dir/acc/checkpoint.safetensors' '$dir/acc_part/checkpoint.safetensors'"
field() { grep -o "\"$1\":[0-9.e+-]*" "$2/metrics.jsonl" | head -1 | cut -d: -f2; }
for f in train_loss grad_norm; do
  a=$(field $f "$dir/b4") b=$(field $f "$dir/acc")
  echo "$f: batch 4 $a, batch 2 x accum 2 $b"
  check "--accum 2 gives the $f of a batch twice as large" "awk 'BEGIN { d = $a - $b; exit !(d * d <= 1e-10 * $a * $a) }'"
done
# --weight-decay: step 1's gradients are the same, so the decay alone moves
# the weights apart, by AdamW's decoupled -lr * wd * w0 (w0 from lrc init,
# the same seed): matrices only, or everything with --decay-all
run "lrc init" "$lrc" init "$model" --preset tiny --seed 0 -o "$dir/init.safetensors"
run "--weight-decay run" "$lrc" train "$model" "${one[@]}" --batch 4 --weight-decay 0.1 -o "$dir/wd"
run "--decay-all run" "$lrc" train "$model" "${one[@]}" --batch 4 --weight-decay 0.1 --decay-all -o "$dir/wda"
same() { "$compare" "$dir/$1/model.safetensors" "$dir/b4/model.safetensors" "$2" 0 >/dev/null; }
check "--weight-decay leaves the norm gains" "same wd model.norm.weight"
check "--weight-decay moves the matrices by lr*wd*w, nothing else" \
  "$tc decay '$dir/init.safetensors' '$dir/b4/model.safetensors' '$dir/wd/model.safetensors' 3e-3 0.1 matrices"
check "--decay-all moves every tensor by lr*wd*w" \
  "$tc decay '$dir/init.safetensors' '$dir/b4/model.safetensors' '$dir/wda/model.safetensors' 3e-3 0.1 all"
# --clip G: step 1's moments are those of the gradient scaled to norm G
# (|m| = (1 - beta1) G, sum v = (1 - beta2) G^2), and a G above the norm
# changes nothing, byte for byte
run "--clip 0.5 run" "$lrc" train "$model" "${one[@]}" --batch 4 --clip 0.5 -o "$dir/clip"
run "--clip 1e9 run" "$lrc" train "$model" "${one[@]}" --batch 4 --clip 1e9 -o "$dir/noclip"
gn=$(field grad_norm "$dir/clip")
check "--clip: the gradient norm ($gn) is above 0.5, so clipping applies" "awk 'BEGIN { exit !($gn > 0.6) }'"
check "--clip 0.5: the moments of a gradient of norm 0.5" "$tc moments '$dir/clip/checkpoint.safetensors' $gn 0.5"
check "no --clip: the moments of the whole gradient" "$tc moments '$dir/b4/checkpoint.safetensors' $gn 0"
check "--clip above the norm equals no --clip" "cmp -s '$dir/noclip/checkpoint.safetensors' '$dir/b4/checkpoint.safetensors'"
check "--accum is kept for --resume" "grep -q '\"accum\":\\s*2' '$dir/acc/run.json'"
# a learning rate that blows the weights up: the step whose gradient is not
# finite stops the run with a message naming it and the tensor, exit 1, and
# the checkpoint of the last good step stays
"$lrc" train "$model" --preset tiny --steps 20 --lr 1e30 --warmup 0 --batch 2 --seq 16 --eval-every 1 \
  --data "$dir/text.txt" --threads 2 -o "$dir/nan" >/dev/null 2>"$dir/nan.err"
status=$?
cat "$dir/nan.err"
check "a non-finite gradient exits 1" "[ $status = 1 ]"
check "it names the step and the tensor" "grep -q \"step 2: the gradient of 'model\\.[a-z_.0-9]*' is not finite\" '$dir/nan.err'"
check "the last good checkpoint is kept" "[ -s '$dir/nan/checkpoint.safetensors' ] && grep -q '\"step\":1,' '$dir/nan/metrics.jsonl'"
# an image model on Fashion-MNIST (Debian's dataset-fashion-mnist): resume
# bit for bit (the data order comes from the seed and the step); 100 steps
# (measured: validation accuracy 0.49 at a fixed seed; chance is 0.10) make
# it learn, and lrc eval's test accuracy is the fraction of the test images
# whose logits (lrc forward on images normalized in Python) argmax to the label
# LayerRoPE's scalars in metrics.jsonl at each evaluation: the last line's
# are the final weights' (a Pre-Norm run has none)
run "layerrope run" "$lrc" train "$model" "${args[@]}" --set norm=layerrope -o "$dir/lr"
check "layerrope: each evaluation logs the 16 scalars, the last equal to model.safetensors'" \
  "/usr/bin/python3 -c \"import sys, json; sys.path.insert(0, '$(dirname "$0")/../tools'); import st
lines = [json.loads(l) for l in open('$dir/lr/metrics.jsonl') if 'val_loss' in l]
a = st.arrays('$dir/lr/model.safetensors')
last = lines[-1]['layerrope']
sys.exit(not (all(len(l.get('layerrope', {})) == 16 for l in lines) and len(lines) == 4 and
    all(abs(v - a['model.layerrope.' + k][2][0]) <= 1e-7 * max(1, abs(v)) for k, v in last.items())))\""
check "pre-norm: no layerrope scalars in metrics.jsonl" "! grep -q layerrope '$dir/full/metrics.jsonl'"
vit=$(dirname "$model")/vit.lua fm=/usr/share/datasets/fashion-mnist
VM=(--preset tiny --set image_size=28 --set patch=7)
V=(train "$vit" "${VM[@]}" --steps 100 --lr 1e-2 --batch 32 --eval-every 50 --threads 2)
run "vit run" "$lrc" "${V[@]}" -o "$dir/vit"
run "vit stopped after 50" "$lrc" "${V[@]}" -o "$dir/vit_half" --stop-after 50
run "vit resumed" "$lrc" train --resume "$dir/vit_half" --threads 2
check "vit: a resumed run is bit-identical" "cmp -s '$dir/vit/checkpoint.safetensors' '$dir/vit_half/checkpoint.safetensors'"
val=$(grep -o '"val_acc":[0-9.]*' "$dir/vit/metrics.jsonl" | tail -1 | cut -d: -f2)
"$lrc" eval "$vit" "${VM[@]}" --weights "$dir/vit/model.safetensors" --threads 2 >"$dir/eval.txt"
test_acc=$(sed -n 's/^test accuracy \([0-9.]*\) (10000 images).*/\1/p' "$dir/eval.txt")
$tc testset "$fm" "$dir/test.safetensors" "$dir/test_labels.txt"
run "lrc forward on the test images" "$lrc" forward "$vit" "${VM[@]}" --weights "$dir/vit/model.safetensors" \
  --input "$dir/test.safetensors" -o "$dir/logits.safetensors" --target cpu --threads 2
counted=$($tc accuracy "$dir/logits.safetensors" "$dir/test_labels.txt")
echo "vit: validation accuracy ${val:-none} after 100 steps, test accuracy ${test_acc:-none}, counted from logits: $counted"
check "vit: validation accuracy above 0.4" "awk 'BEGIN { exit !(${val:-0} > 0.4) }'"
check "vit: lrc eval's test accuracy of 10000 images is the counted one" "[ -n '$test_acc' ] && [ '$counted' = '$test_acc 10000' ]"
check "vit: test accuracy within 0.05 of validation accuracy" "awk 'BEGIN { d = ${test_acc:-0} - ${val:-1}; exit !(d * d < 0.0025) }'"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
