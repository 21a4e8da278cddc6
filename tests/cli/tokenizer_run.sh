#!/bin/bash
# tokenizer_run.sh LRC ST_COMPARE — text through a tokenizer.json in every command that
# reads or writes it: a short lrc train --tokenizer (the token cache beside
# the run, the run's copy, vocab set from the tokenizer, val_loss_per_byte),
# --resume bit for bit, eval's loss equal to the run's, generate's text,
# compile's package carrying the tokenizer, export writing it, and a
# Hugging Face directory's own tokenizer.json in generate, eval and train
# (fine-tuning its weights, also with norm=layerrope).
lrc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
stc=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
here=$(cd "$(dirname "$0")" && pwd)
tok=$here/../fixtures/tokenizers/bytelevel_4k/tokenizer.json
source "$here/../tools/check.sh"
cd "$dir" || exit 1
mkdir runs
bible -f Gen1:1-Rev22:21 2>/dev/null | head -3000 >data.txt
args=(llama --preset tiny --set norm=layerrope --steps 4 --lr 3e-3 --seq 32 --batch 4 --eval-every 2 --data data.txt)
"$lrc" train "${args[@]}" --tokenizer "$tok" -o runs/a >a.log 2>&1
check "train --tokenizer runs" "[ -f runs/a/model.safetensors ]"
check "the text is encoded once into a cache beside the run" "ls runs/tokens-*.bin >/dev/null 2>&1 && grep -q '^tokenized data.txt' a.log"
check "the run keeps the tokenizer" "cmp -s runs/a/tokenizer.json '$tok'"
check "vocab is the tokenizer's size" "grep -q '\"vocab=4000\"' runs/a/run.json"
check "metrics have the loss per byte" "grep -q val_loss_per_byte runs/a/metrics.jsonl"
vpb=$(tail -1 runs/a/metrics.jsonl | python3 -c 'import json,sys; m=json.loads(sys.stdin.read()); print(m["val_loss"], m["val_loss_per_byte"])')
check "the loss per byte is below the loss per token (tokens of several bytes)" "python3 -c 'import sys; t, b = map(float, \"$vpb\".split()); sys.exit(not 0 < b < t)'"
"$lrc" train "${args[@]}" --tokenizer "$tok" --stop-after 2 -o runs/b >b.log 2>&1
"$lrc" train --resume runs/b >b2.log 2>&1
check "a second run reads the cache" "! grep -q '^tokenized' b.log"
check "--resume ends where the run in one go ends" "cmp -s runs/a/model.safetensors runs/b/model.safetensors"
m=(llama --preset tiny --set norm=layerrope --set vocab=4000 --weights runs/a/model.safetensors)
"$lrc" eval "${m[@]}" --tokenizer runs/a --data data.txt --seq 32 --batch 4 --steps 4 >eval.log 2>&1
want=$(tail -1 runs/a/metrics.jsonl | python3 -c 'import json,sys; print("%.4f" % json.loads(sys.stdin.read())["val_loss"])')
check "eval's loss is the run's last validation loss" "grep -q 'validation loss $want nats/token' eval.log"
"$lrc" generate "${m[@]}" --tokenizer runs/a --prompt "And God said, " -n 12 --temperature 0 >gen.txt 2>gen.err
check "generate prints the prompt and a decoded continuation" "grep -q '^And God said, ..' gen.txt && python3 -c 'open(\"gen.txt\", encoding=\"utf-8\").read()'"
"$lrc" compile "${m[@]}" --tokenizer runs/a --target cpu --ctx 32 -o pkg >compile.log 2>&1
check "compile puts the tokenizer into the package" "cmp -s pkg/tokenizer.json '$tok'"
"$lrc" generate pkg --prompt "And God said, " -n 12 --temperature 0 >gen_pkg.txt 2>/dev/null
check "the package generates the same text with its own tokenizer" "cmp -s gen.txt gen_pkg.txt"
"$lrc" export runs/a --hf hf >export.log 2>&1
check "export writes the run's tokenizer" "cmp -s hf/tokenizer.json '$tok'"
# a Hugging Face directory with a tokenizer.json uses it without --tokenizer
cp -r "$here/../fixtures/hf/llama_mha" hfdir && cp "$here/../tokenizer/small.json" hfdir/tokenizer.json
"$lrc" generate hfdir --prompt "a b ab" -n 6 --temperature 0 >hfgen.txt 2>hfgen.err
check "generate on a directory encodes the prompt with its tokenizer" "grep -q 'prompt: 6 tokens' hfgen.err && grep -q '^a b ab' hfgen.txt"
printf 'a b ab ba %.0s' $(seq 300) >ab.txt
"$lrc" eval hfdir --data ab.txt --seq 16 --batch 2 --steps 2 >hfeval.txt 2>&1
check "eval on a directory reports nats per token and per byte" "grep -q 'nats/token, [0-9.]* nats/byte' hfeval.txt"
# fine-tuning the directory: its weights, then steps on its tokenizer's ids
"$lrc" train hfdir --steps 1 --lr 1e-12 --seq 16 --batch 2 --eval-every 1 --data ab.txt -o runs/ft >ft.log 2>&1
check "fine-tuning starts from the directory's weights" "grep -q 'fine-tuning from hfdir/model.safetensors: 21 tensors\$' ft.log &&
  '$stc' runs/ft/model.safetensors hfdir/model.safetensors model.layers.1.mlp.down_proj.weight 1e-6 >/dev/null"
want=$(tail -1 runs/ft/metrics.jsonl | python3 -c 'import json,sys; print("%.4f" % json.loads(sys.stdin.read())["val_loss"])')
"$lrc" eval hfdir --data ab.txt --seq 16 --batch 2 --steps 4 >hfeval4.txt 2>&1
check "its first validation loss is the directory's own (eval)" "grep -q 'validation loss $want nats/token' hfeval4.txt"
"$lrc" train hfdir --set norm=layerrope --steps 2 --lr 1e-3 --seq 16 --batch 2 --data ab.txt -o runs/ft_lr >ftlr.log 2>&1
check "fine-tuning with norm=layerrope: LayerRoPE's gains from the seed, the per-layer norms left out" \
  "grep -q '17 tensors, 20 initialised from the seed (model.layerrope.*), 4 of the checkpoint left out (model.layers.0.input_layernorm.weight' ftlr.log && [ -f runs/ft_lr/model.safetensors ]"
# ... and back: the LayerRoPE fine-tune folds into a standard llama directory with its tokenizer
"$lrc" export runs/ft_lr --hf hf_lr >exlr.log 2>&1
in=$here/../fixtures/hf/llama_mha/input.safetensors
"$lrc" forward hf_lr --input "$in" -o exported.st >/dev/null 2>&1
"$lrc" forward hfdir --set norm=layerrope --weights runs/ft_lr/model.safetensors --input "$in" -o tuned.st >/dev/null 2>&1
check "the LayerRoPE fine-tune exports with the directory's tokenizer, the same logits" \
  "cmp -s hf_lr/tokenizer.json hfdir/tokenizer.json && '$stc' exported.st tuned.st logits 1e-5 >/dev/null"
summary
