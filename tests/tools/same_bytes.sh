#!/bin/bash
# same_bytes.sh OLD_LRC NEW_LRC — a refactoring's check that behaviour did not
# change: on every PyTorch fixture (tests/fixtures/{llama,vit,parcae}/*) and
# every Hugging Face directory (tests/fixtures/hf/*, run as the model), the
# logits of `lrc forward` and the loss and gradients of `lrc backward`, on ref
# and on cpu (2 threads), written by the two binaries, are compared byte for byte (cmp).
# Prints one line per case that differs and a count; exit 1 if any differs.
set -u
old=${1:?usage: same_bytes.sh OLD_LRC NEW_LRC} new=${2:?usage: same_bytes.sh OLD_LRC NEW_LRC}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
same=0 differ=0
run() { # BIN OUT CMD MODEL DIR TARGET; MODEL "": the directory is the model, its weights its own
    local bin=$1 out=$2 cmd=$3 model=$4 dir=$5 target=$6 args=() input=$5/input.safetensors
    if [ -z "$model" ]; then
        model=$dir
    else
        # an image model's backward reads its labels from batch.safetensors
        [ "$cmd" = backward ] && [ -f "$dir/batch.safetensors" ] && input=$dir/batch.safetensors
        while IFS= read -r line; do args+=(--set "$line"); done <"$dir/config.txt"
        args+=(--weights "$dir/weights.safetensors")
    fi
    "$bin" "$cmd" "$model" "${args[@]}" --input "$input" --target "$target" --threads 2 -o "$out" >/dev/null 2>"$out.err"
}
compare() { # LABEL MODEL DIR: forward and backward on ref and cpu, old against new
    local cmd target
    for cmd in forward backward; do
        for target in ref cpu; do
            run "$old" "$tmp/a.st" $cmd "$2" "$3" $target
            run "$new" "$tmp/b.st" $cmd "$2" "$3" $target
            if [ -s "$tmp/a.st" ] && cmp -s "$tmp/a.st" "$tmp/b.st"; then
                same=$((same + 1))
            else
                differ=$((differ + 1))
                echo "DIFFER $1 $cmd --target $target: $(head -c 200 "$tmp/b.st.err")"
            fi
            rm -f "$tmp/a.st" "$tmp/b.st"
        done
    done
}
for family in llama vit parcae; do
    for dir in "$root"/tests/fixtures/$family/*/; do compare "$family/$(basename "$dir")" "$root/models/$family.lua" "$dir"; done
done
for dir in "$root"/tests/fixtures/hf/*/; do compare "hf/$(basename "$dir")" "" "$dir"; done
echo "same_bytes: $same outputs byte-identical, $differ differ"
[ $differ = 0 ]
