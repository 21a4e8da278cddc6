-- input_mask.lua — a run-time input besides the tokens (issue 49): a mask
-- [B, T] that scales each position's embedding, declared with a default
-- (mask_default) or, with --set with_default=false, without one.
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = {}
M.defaults = { d = 16, vocab = 256, with_default = true, mask_default = 0.5 }
function M.build(cfg, tokens)
  local h = nn.embedding("embed", cfg.vocab, cfg.d)(tokens)
  local opts = cfg.with_default and {default = cfg.mask_default} or nil
  local m = lrc.input("attention_mask", tokens.shape, "f32", opts)
  h = h * m:reshape{tokens.shape[1], tokens.shape[2], 1}
  h = h + nn.linear("mix", cfg.d, cfg.d)(h)
  return nn.linear("lm_head", cfg.d, cfg.vocab)(h)
end
return M
