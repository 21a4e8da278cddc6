#!/usr/bin/env bash
# hf_model_path.sh — a Hugging Face family as one Lua file on LRC_MODEL_PATH,
# with no rebuild: a committed transformers checkpoint whose config.json
# names a model_type lrc does not build in ("mytiny") runs once a folder on
# LRC_MODEL_PATH holds a file whose from_hf names it, with the logits of the
# same checkpoint as llama (0 difference) and transformers' within 1e-5;
# without the folder it fails in one line naming the model_type and the
# known ones. Also: lrc inspect names the file that mapped the directory, a
# user's file overrides a built-in model_type, an earlier folder overrides
# a later one, and two files of one folder claiming a model_type, a folder
# that cannot be read and a family file that does not parse each end in one
# line (the checks of error_harness.sh).
#
#   tests/cli/hf_model_path.sh PATH_TO_LRC PATH_TO_ST_COMPARE
set -u
export LC_ALL=C
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: $0 PATH_TO_LRC PATH_TO_ST_COMPARE" >&2
  exit 2
fi
LRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
CMP=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HF=$ROOT/tests/fixtures/hf
PY=${PYTHON:-python3}
VERBOSE=${LRC_TESTS_VERBOSE:-0}
unset LRC_MODEL_PATH
# shellcheck source=error_harness.sh
. "$ROOT/tests/cli/error_harness.sh"

# the family files live outside the scratch directory, which t watches
FAM=$(mktemp -d "${TMPDIR:-/tmp}/lrc-families.XXXXXX") || exit 2
trap 'rm -rf "$T" "$CAP" "$FAM"' EXIT
mkdir "$FAM/fam" "$FAM/dup" "$FAM/over" "$FAM/early" "$FAM/bad"
# A family lrc does not build in: llama's model under a new model_type,
# its config read as llama's.
cat >"$FAM/fam/mytiny.lua" <<'LUA'
local llama = require "models.llama"
local M = {}
for k, v in pairs(llama) do M[k] = v end
M.from_hf = { mytiny = llama.from_hf.llama }
return M
LUA
cp "$FAM/fam/mytiny.lua" "$FAM/early/first.lua"
sed 's/mytiny = /llama = /' "$FAM/fam/mytiny.lua" >"$FAM/over/llama_again.lua"
cp "$FAM/fam/mytiny.lua" "$FAM/dup/a.lua"
cp "$FAM/fam/mytiny.lua" "$FAM/dup/b.lua"
echo 'return {' >"$FAM/bad/broken.lua"
echo 'not a model file, skipped' >"$FAM/fam/notes.txt"

SRC=$HF/llama_gqa_bias
cfg mytiny 'c["model_type"] = "mytiny"'
in=$SRC/input.safetensors

check() { # check NAME COMMAND...: a check beside the lrc runs
  if "${@:2}" >"$CAP/check" 2>&1; then
    passed=$((passed + 1))
    [ "$VERBOSE" != 0 ] && echo "ok   $1"
  else
    failed=$((failed + 1))
    echo "FAIL $1: $(head -c 400 "$CAP/check" | tr '\n' '|')"
  fi
}
family_is() { # family_is DIR FILE MODEL_TYPE: lrc inspect DIR names FILE
  "$LRC" inspect "$1" | grep -qxF "family: $2 (model_type $3)"
}

t "an unknown model_type, no LRC_MODEL_PATH" 1 'mytiny/config.json: model_type = "mytiny" is not supported' \
  'lrc runs .*llama' 'LRC_MODEL_PATH' -- forward mytiny --input "$in" -o out.safetensors
ok "control: the checkpoint as llama" forward "$SRC" --input "$in" -o llama.safetensors
export LRC_MODEL_PATH=$FAM/fam
ok "the checkpoint as mytiny, its family on LRC_MODEL_PATH" forward mytiny --input "$in" -o mytiny.safetensors
check "mytiny's logits equal llama's" "$CMP" mytiny.safetensors llama.safetensors logits 0
check "mytiny's logits within 1e-5 of transformers'" "$CMP" mytiny.safetensors "$SRC/expected.safetensors" logits 1e-5
check "inspect names the user's file" family_is mytiny "$FAM/fam/mytiny.lua" mytiny
check "inspect names a built-in file" family_is "$SRC" models/llama.lua llama
LRC_MODEL_PATH=$FAM/over check "a user's file overrides a built-in model_type" family_is "$SRC" \
  "$FAM/over/llama_again.lua" llama
LRC_MODEL_PATH=:$FAM/early:$FAM/fam: check "an earlier folder overrides a later one" family_is mytiny \
  "$FAM/early/first.lua" mytiny
LRC_MODEL_PATH=$FAM/dup t "two files of one folder claim a model_type" 1 "$FAM/dup/a.lua and $FAM/dup/b.lua" \
  'both claim model_type mytiny' -- inspect mytiny
LRC_MODEL_PATH=$FAM/nowhere t "a folder on LRC_MODEL_PATH that does not exist" 1 \
  "LRC_MODEL_PATH: $FAM/nowhere: No such file or directory" -- inspect mytiny
LRC_MODEL_PATH=$FAM/bad:$FAM/fam t "a family file that does not parse" 1 "$FAM/bad/broken.lua:" -- inspect mytiny

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
