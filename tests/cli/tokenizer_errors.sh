#!/usr/bin/env bash
# tokenizer_errors.sh — bad tokenizer.json files and bad text: a truncated or
# invalid file, an unknown model, normalizer or pre-tokenizer type, a key lrc
# does not implement, a merge naming a token that is not in the vocabulary, a
# regex PCRE2 rejects, and text or ids that are not what they should be. Each
# ends in one line naming the JSON path or the byte offset, exit 1, nothing on
# stdout and no file left (the rule and the checks of error_harness.sh).
#
#   tests/cli/tokenizer_errors.sh PATH_TO_LRC
set -u
export LC_ALL=C
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH_TO_LRC" >&2
  exit 2
fi
LRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BASE=$ROOT/tests/tokenizer/small.json
VERBOSE=${LRC_TESTS_VERBOSE:-0}
# shellcheck source=error_harness.sh
. "$ROOT/tests/cli/error_harness.sh"

# tok FILE PYTHON: small.json edited by the Python statements (j is the dict)
tok() {
  python3 - "$BASE" "$1" "$2" <<'PYEOF' || { echo "tokenizer_errors.sh: editing $1 failed" >&2; exit 2; }
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
exec(sys.argv[3])
json.dump(j, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PYEOF
}

printf 'a b' >text.txt
ok "control: the base tokenizer encodes" tokenize "$BASE"

head -c 200 "$BASE" >cut.json
t "a truncated tokenizer.json" 1 'cut.json' 'JSON at byte [0-9]+' -- tokenize cut.json
printf '{"model": [1, 2,, 3]}' >bad.json
t "invalid JSON" 1 'bad.json: invalid JSON at byte 16' -- tokenize bad.json
printf '{"model": "\xff"}' >latin1.json
t "a tokenizer.json that is not UTF-8" 1 'latin1.json: invalid UTF-8 at byte 11' -- tokenize latin1.json
t "no such file" 1 'nope.json' -- tokenize nope.json
tok wp.json 'j["model"]["type"] = "WordPiece"'
t "an unknown model type" 1 'wp.json: model.type: the model "WordPiece" is not implemented' -- tokenize wp.json
tok merge.json 'j["model"]["merges"].append("a zz")'
t "a merge naming a token not in the vocabulary" 1 'model.merges\[2\]: the token "zz" is not in model.vocab' -- tokenize merge.json
tok merged.json 'j["model"]["merges"].append("b a")'
t "a merge whose result is not in the vocabulary" 1 'model.merges\[2\]: the token "ba" is not in model.vocab' -- tokenize merged.json
tok merge3.json 'j["model"]["merges"].append("a b a")'
t "a merge of three tokens" 1 'model.merges\[2\]: must be two tokens' -- tokenize merge3.json
tok regex.json 'j["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(a|b"}, "behavior": "Isolated", "invert": False}'
t "a regex PCRE2 rejects" 1 'pre_tokenizer.pattern.Regex: PCRE2 rejects the regex at offset 4' -- tokenize regex.json
tok lower.json 'j["normalizer"]["normalizers"].append({"type": "Lowercase"})'
t "a normalizer lrc lacks" 1 'normalizer.normalizers\[2\].type: the normalizer "Lowercase" is not implemented' -- tokenize lower.json
tok ws.json 'j["pre_tokenizer"] = {"type": "Whitespace"}'
t "a pre-tokenizer lrc lacks" 1 'pre_tokenizer.type: the pre-tokenizer "Whitespace" is not implemented' -- tokenize ws.json
tok dec.json 'j["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}'
t "a decoder lrc lacks" 1 'decoder.type: the decoder "WordPiece" is not implemented' -- tokenize dec.json
tok key.json 'j["model"]["fancy"] = 1'
t "a key lrc does not implement" 1 'model.fancy: the key "fancy" is not implemented' -- tokenize key.json
tok drop.json 'j["model"]["dropout"] = 0.1'
t "BPE dropout" 1 'model.dropout: is not implemented' -- tokenize drop.json
tok prefix.json 'j["model"]["continuing_subword_prefix"] = "##"'
t "a continuing-subword prefix" 1 'model.continuing_subword_prefix: is not implemented' -- tokenize prefix.json
tok trunc.json 'j["truncation"] = {"max_length": 8}'
t "truncation" 1 'truncation: is not implemented' -- tokenize trunc.json
tok vocab.json 'j["model"]["vocab"]["c"] = -3'
t "a negative id" 1 'model.vocab\["c"\]: must be an id' -- tokenize vocab.json
tok big.json 'j["model"]["vocab"]["c"] = 2**31 - 2'
t "an id past 2^24" 1 'model.vocab\["c"\]: must be an id .an integer from 0, below 2\^24.' -- tokenize big.json
tok sw.json 'j["added_tokens"][0]["single_word"] = True'
t "a single-word added token" 1 'added_tokens\[0\].single_word: true is not implemented' -- tokenize sw.json

printf 'ab\xe4\xb8 b' >bad_utf8.txt
STDIN=bad_utf8.txt t "text that is not UTF-8" 1 'stdin: invalid UTF-8 at byte 2' -- tokenize "$BASE"
printf 'a b\nab \xc3\x28\n' >bad_line.txt
STDIN=bad_line.txt t "a line that is not UTF-8" 1 'stdin:2 \(the line from byte 4\): invalid UTF-8 at byte 3' -- tokenize "$BASE" --lines
printf '0 4 x1\n' >ids.txt
STDIN=ids.txt t "decoding a word that is not an id" 1 "stdin:1: 'x1' is not an id" -- tokenize "$BASE" --decode
printf '0 4\n1 99\n' >ids2.txt
STDIN=ids2.txt t "decoding an id outside the vocabulary" 1 'stdin:2: id 99 is outside the vocabulary \(0 to 8\)' -- tokenize "$BASE" --decode --lines
t "no tokenizer given" 2 'needs TOKENIZER' -- tokenize

# training: a bad tokenizer or a vocabulary too small leaves no run
t "train with a tokenizer that does not load" 1 'wp.json: model.type' -- train llama --preset tiny --steps 1 --lr 1e-3 --tokenizer wp.json -o run
printf 'a b ab a b ab %.0s' $(seq 200) >data.txt
t "train with a vocabulary smaller than the tokenizer's" 1 'the tokenizer has 9 tokens, the model.s vocabulary 4 \(--set vocab=9\)' \
  -- train llama --preset tiny --set vocab=4 --steps 1 --lr 1e-3 --seq 8 --batch 2 --data data.txt --tokenizer "$BASE" -o run
rm -f tokens-*.bin

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
