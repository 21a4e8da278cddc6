#!/bin/bash
# fixtures.sh LRC — lrc tokenize against the ids that Hugging Face's
# `tokenizers` library wrote for the tokenizers it trained
# (tests/fixtures/tokenizers): every line of the UTF-8 edge corpus, the corpus
# as one text, every line of the King James Bible (by count and CRC of the
# ids), and decode(encode(s)) == s wherever the library's own holds.
lrc=$1
here=$(cd "$(dirname "$0")" && pwd)
fx=$here/../fixtures/tokenizers
source "$here/../tools/check.sh"
compare() { python3 "$here/compare.py" "$@" >"$dir/cmp.txt" 2>&1 || { cat "$dir/cmp.txt"; return 1; }; }
bible -f Gen1:1-Rev22:21 >"$dir/kjv.txt" 2>/dev/null || { echo "FAIL: the King James Bible (bible-kjv) is not installed"; exit 1; }
for t in "$fx"/*/; do
  t=${t%/}; name=$(basename "$t")
  "$lrc" tokenize "$t/tokenizer.json" --lines <"$fx/edge.txt" >"$dir/edge.out" 2>"$dir/err" || cat "$dir/err"
  check "$name: every edge-corpus line" "compare ids '$t/edge.ids' '$dir/edge.out'"
  awk '{ $1 = ""; sub(/^ /, ""); print }' "$t/edge.ids" >"$dir/edge.idsonly"
  # the library's decode leaves special tokens out by default (skip_special_tokens)
  "$lrc" tokenize "$t/tokenizer.json" --lines --decode --no-special <"$dir/edge.idsonly" >"$dir/edge.dec" 2>"$dir/err" || cat "$dir/err"
  check "$name: edge lines decode back where the library's do" "compare roundtrip '$t/edge.ids' '$fx/edge.txt' '$dir/edge.dec'"
  # --no-special: the same ids without the post-processor's BOS (sp_*, bytelevel_16k)
  want=$(head -1 "$t/edge.ids" | cut -d' ' -f2-)
  case $name in sp_1k|sp_16k|bytelevel_16k) want=${want#* } ;; esac
  got=$(head -1 "$fx/edge.txt" | tr -d '\n' | "$lrc" tokenize "$t/tokenizer.json" --no-special)
  check "$name: --no-special leaves the BOS out" "[ '$got' = '$want' ]"
  "$lrc" tokenize "$t/tokenizer.json" <"$fx/edge.txt" >"$dir/whole.out" 2>"$dir/err" || cat "$dir/err"
  check "$name: the edge corpus as one text" "compare ids '$t/edge_whole.ids' '$dir/whole.out'"
  if [ "$(cut -d' ' -f1 "$t/edge_whole.ids")" = 1 ]; then
    "$lrc" tokenize "$t/tokenizer.json" --decode --no-special <"$dir/whole.out" >"$dir/whole.dec"
    check "$name: the whole corpus decodes back" "command cmp -s '$dir/whole.dec' '$fx/edge.txt'"
  fi
  [ -f "$t/kjv.crc" ] || continue
  "$lrc" tokenize "$t/tokenizer.json" --lines <"$dir/kjv.txt" >"$dir/kjv.out" 2>"$dir/err" || cat "$dir/err"
  check "$name: every line of the King James Bible" "compare crc '$t/kjv.crc' '$dir/kjv.out'"
  "$lrc" tokenize "$t/tokenizer.json" --lines --decode --no-special <"$dir/kjv.out" >"$dir/kjv.dec" 2>"$dir/err" || cat "$dir/err"
  check "$name: the Bible's lines decode back where the library's do" "compare roundtrip '$t/kjv.crc' '$dir/kjv.txt' '$dir/kjv.dec'"
done
summary
