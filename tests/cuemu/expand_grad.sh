#!/bin/bash
# expand_grad.sh LRC ST_COMPARE — the gradient of lrc.expand (a sum_to over
# the repeated axis) where it is an activation that a GEMM reads: a head
# [B, T, 1, d] repeated to [B, T, 2, d] (as a value head shared by a pair of
# query heads) and fed to a linear layer. At bf16 the GEMM of the layer
# below takes that gradient beside its bf16 weights, so the sum_to must be
# stored as they are (it was f32, and the GEMM refused mixed operands).
# lrc backward on cuda at f32 and bf16 against the reference backend.
set -u
lrc=$1 compare=$2
source "$(dirname "$0")/common.sh"
cat >"$out/m.lua" <<'LUA'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d = 16, vocab = 256 } }
function M.build(cfg, tokens)
  local B, T, d = tokens.shape[1], tokens.shape[2], cfg.d
  local h = nn.linear("a", d, d)(nn.embedding("emb", cfg.vocab, d)(tokens))
  h = lrc.reshape(lrc.expand(lrc.reshape(h, { B, T, 1, d }), { B, T, 2, d }), { B, T, 2 * d })
  return nn.linear("head", 2 * d, cfg.vocab)(h)
end
return M
LUA
tokens "$out/in.st" 2 9
"$lrc" init "$out/m.lua" --seed 3 -o "$out/w.st" >/dev/null &&
  "$lrc" backward "$out/m.lua" --weights "$out/w.st" --input "$out/in.st" -o "$out/gref.st" --target ref >/dev/null ||
  { echo "FAIL: the reference failed"; exit 1; }
for p in f32 bf16; do
  tol=1e-4 floor=
  [ $p = bf16 ] && tol=5e-2 floor=1e-2
  "$lrc" backward "$out/m.lua" --weights "$out/w.st" --input "$out/in.st" -o "$out/g.st" --target cuda --precision $p ||
    { echo "FAIL $p: lrc backward failed"; failed=1; continue; }
  echo -n "$p, gradients: "
  "$compare" "$out/g.st" "$out/gref.st" '*' $tol $floor || failed=1
done
exit $failed
