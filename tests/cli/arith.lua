-- arith.lua — numbers on either side of + - * / (`1 - x`, `2 / x`, `x + 1`)
-- and the elementwise primitives as functions and as tensor methods, on an
-- embedding's rows h; tests/cli/arith.sh computes the same from the weights.
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = {}
M.defaults = { d = 8, vocab = 16 }
function M.build(cfg, tokens)
  local h = nn.embedding("embed", cfg.vocab, cfg.d)(tokens)
  local a = (1 - h) * (2 / (h * h + 1)) + (h + 1) / (3 + h * h) - (h - 0.5)
  local b = lrc.where(lrc.gt(h, 0), h:sqrt(), h:neg():exp()) + lrc.maximum(h, lrc.full({}, 0.25)) * lrc.sin(h)
  return a + b + lrc.pow(h * h + 1, lrc.full({ 1, 1, cfg.d }, 0.5)) - h:abs():log1p()
end
return M
