#!/bin/bash
# model_inputs.sh LRC ST_COMPARE — a model's run-time input besides the
# tokens (lrc.input, issue 49), input_mask.lua's attention_mask: forward and
# backward take it from --input on ref and cpu (cpu within 1e-5 of ref, and
# the mask changes the result); left out, the model's default fills it
# (the same bytes as a file holding the default everywhere); with no
# default, one line naming the input and how to give it. lrc train fills it
# from the default and says so in one line; with no default it stops in
# one line naming it. lrc.input's options are checked at the model's line.
# forward of a model or a package ignores a file's labels (backward's)
# and refuses any other tensor the model has no input for.
set -u
lrc=$1 compare=$2
here=$(cd "$(dirname "$0")" && pwd)
model=$here/input_mask.lua
st="/usr/bin/python3 $here/../tools/st.py"
source "$here/../tools/check.sh" # $dir, check, summary
# CMD OUT ARGS...: a run that should succeed, its exit status a check of its own
ok() {
  local what=$1
  shift
  "$lrc" "$@" --threads 2 >"$dir/last.out" 2>"$dir/last.err"
  local s=$?
  check "$what exits 0 (status $s: $(head -c 300 "$dir/last.err"))" "[ $s = 0 ]"
}
# WHAT PATTERN ARGS...: exit 1 with one line on stderr matching PATTERN, nothing on stdout
refused() {
  local what=$1 pattern=$2
  shift 2
  "$lrc" "$@" >"$dir/bad.out" 2>"$dir/bad.err"
  local s=$?
  check "$what: exit 1 (status $s)" "[ $s = 1 ]"
  check "$what: one line matching '$pattern' ($(head -c 400 "$dir/bad.err"))" \
    "[ \$(wc -l <'$dir/bad.err') = 1 ] && grep -q -- \"$pattern\" '$dir/bad.err' && [ ! -s '$dir/bad.out' ]"
}
same() { check "$1" "'$compare' '$2' '$3' '*' 1e-5 >/dev/null 2>&1"; }
"$lrc" init "$model" --seed 5 -o "$dir/w.st" >/dev/null
ints() { awk -v n="$1" -v a="$2" -v m="$3" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", i ? "," : "", (a * i + 3) % m }'; }
tokens="\"tokens\": [\"I32\", [2, 12], [$(ints 24 37 256)]]"
labels="\"labels\": [\"I32\", [2, 12], [$(ints 24 11 256)]]"
mask="\"attention_mask\": [\"F32\", [2, 12], [$(ints 24 5 3 | sed 's/2/0.25/g')]]"
half="\"attention_mask\": [\"F32\", [2, 12], [$(ints 24 0 1 | sed 's/0/0.5/g')]]"
$st make "$dir/tok.st" "{$tokens}"
$st make "$dir/mask.st" "{$tokens, $mask}"
$st make "$dir/half.st" "{$tokens, $half}"
$st make "$dir/lab.st" "{$tokens, $labels}"
$st make "$dir/labmask.st" "{$tokens, $labels, $mask}"
$st make "$dir/labhalf.st" "{$tokens, $labels, $half}"
$st make "$dir/bogus.st" "{$tokens, \"bogus\": [\"F32\", [1], [1]]}"
w=(--weights "$dir/w.st")
for t in ref cpu; do
  ok "forward --target $t, the mask given" forward "$model" "${w[@]}" --input "$dir/mask.st" -o "$dir/f_mask_$t.st" --target $t
  ok "forward --target $t, the mask of 0.5 given" forward "$model" "${w[@]}" --input "$dir/half.st" -o "$dir/f_half_$t.st" --target $t
  ok "forward --target $t, the mask left to its default" forward "$model" "${w[@]}" --input "$dir/tok.st" -o "$dir/f_def_$t.st" --target $t
  ok "backward --target $t, the mask given" backward "$model" "${w[@]}" --input "$dir/labmask.st" -o "$dir/b_mask_$t.st" --target $t
  ok "backward --target $t, the mask of 0.5 given" backward "$model" "${w[@]}" --input "$dir/labhalf.st" -o "$dir/b_half_$t.st" --target $t
  ok "backward --target $t, the mask left to its default" backward "$model" "${w[@]}" --input "$dir/lab.st" -o "$dir/b_def_$t.st" --target $t
  for k in f b; do
    check "$k --target $t: the default fills as a file of 0.5 does (the same bytes)" "cmp -s '$dir/${k}_def_$t.st' '$dir/${k}_half_$t.st'"
    check "$k --target $t: the given mask is used (the result is not the default's)" \
      "! '$compare' '$dir/${k}_mask_$t.st' '$dir/${k}_def_$t.st' '*' 1e-3 >/dev/null 2>&1"
  done
done
for k in f_mask f_def b_mask b_def; do same "$k: cpu within 1e-5 of ref" "$dir/${k}_cpu.st" "$dir/${k}_ref.st"; done
nodef=(--set with_default=false)
for t in ref cpu; do
  refused "forward --target $t, no default and no mask" "tok.st: no tensor 'attention_mask' (f32 \[2,12\]).*--input file.*default = v" \
    forward "$model" "${nodef[@]}" "${w[@]}" --input "$dir/tok.st" -o "$dir/x.st" --target $t
  refused "backward --target $t, no default and no mask" "lab.st: no tensor 'attention_mask' (f32 \[2,12\]).*--input file.*default = v" \
    backward "$model" "${nodef[@]}" "${w[@]}" --input "$dir/lab.st" -o "$dir/x.st" --target $t
done
ok "backward without a default, the mask given" backward "$model" "${nodef[@]}" "${w[@]}" --input "$dir/labmask.st" -o "$dir/b_nodef.st"
check "backward: the mask given, with or without a default, the same bytes" "cmp -s '$dir/b_nodef.st' '$dir/b_mask_ref.st'"
# a file with backward's labels serves forward too: they are ignored there
ok "forward, a file with labels" forward "$model" "${w[@]}" --input "$dir/lab.st" -o "$dir/f_lab.st"
check "forward: labels change nothing (the same bytes as without them)" "cmp -s '$dir/f_lab.st' '$dir/f_def_ref.st'"
check "compile a package" "'$lrc' compile '$model' --weights '$dir/w.st' --target cpu --batch 2 --seq 12 -o '$dir/pkg' >/dev/null 2>&1"
ok "forward of the package, a file with labels" forward "$dir/pkg" --input "$dir/labmask.st" -o "$dir/p_lab.st"
ok "forward of the package, the same without them" forward "$dir/pkg" --input "$dir/mask.st" -o "$dir/p_tok.st"
check "forward of a package: labels change nothing (the same bytes)" "cmp -s '$dir/p_lab.st' '$dir/p_tok.st'"
refused "forward, a tensor the model has no input for" "bogus.st: unexpected tensor 'bogus'" \
  forward "$model" "${w[@]}" --input "$dir/bogus.st" -o "$dir/x.st"
refused "backward, a tensor the model has no input for" "bogus.st: unexpected tensor 'bogus' (the model's inputs: tokens, attention_mask, labels)" \
  backward "$model" "${w[@]}" --input "$dir/bogus.st" -o "$dir/x.st"
# lrc train: the default fills the mask, said once
for i in $(seq 1 60); do echo "In the beginning God created the heaven and the earth."; done >"$dir/text.txt"
args=(--steps 3 --lr 1e-2 --batch 4 --seq 16 --eval-every 2 --data "$dir/text.txt")
ok "train with the mask's default" train "$model" "${args[@]}" -o "$dir/run"
check "train says once that the default filled the mask ($(grep -c 'attention_mask' "$dir/last.out") lines)" \
  "[ \$(grep -c 'attention_mask' '$dir/last.out') = 1 ] && grep -qx \"train: input 'attention_mask' \[4,16\] f32 filled with its default 0.5\" '$dir/last.out'"
check "train: 3 steps in metrics.jsonl" "[ \"\$(grep -c '\"train_loss\"' '$dir/run/metrics.jsonl' 2>/dev/null)\" = 3 ]"
ok "train --set mask_default=1" train "$model" "${args[@]}" --set mask_default=1 -o "$dir/run1"
check "train says the default it used" "grep -qx \"train: input 'attention_mask' \[4,16\] f32 filled with its default 1\" '$dir/last.out'"
check "the default changes training" "! cmp -s '$dir/run/model.safetensors' '$dir/run1/model.safetensors'"
refused "train, no default" "train: no data for input 'attention_mask' (f32 \[4,16\]).*default = v" \
  train "$model" "${nodef[@]}" "${args[@]}" --threads 2 -o "$dir/run_nodef"
# lrc.input's options: checked at the model's line
sed 's/{default = cfg.mask_default}/{default = "one"}/' "$model" >"$dir/bad_default.lua"
sed 's/{default = cfg.mask_default}/{defualt = 1}/' "$model" >"$dir/bad_key.lua"
sed 's/"f32", opts/"i32", {default = 0.5}/' "$model" >"$dir/bad_int.lua"
refused "lrc.input, a default that is no number" "bad_default.lua:11: input 'attention_mask': default must be a finite number" \
  forward "$dir/bad_default.lua" "${w[@]}" --input "$dir/tok.st" -o "$dir/x.st"
refused "lrc.input, an unknown option" "bad_key.lua:11: input 'attention_mask': unknown option 'defualt' (options: default)" \
  forward "$dir/bad_key.lua" "${w[@]}" --input "$dir/tok.st" -o "$dir/x.st"
refused "lrc.input, a fraction for an i32 input" "bad_int.lua:11: input 'attention_mask': default 0.5 of an i32 input must be a 32-bit integer" \
  forward "$dir/bad_int.lua" "${w[@]}" --input "$dir/tok.st" -o "$dir/x.st"
summary
