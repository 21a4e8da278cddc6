-- attention_sdpa.lua — attention's general form from run-time inputs, for
-- attention_sdpa.py's check against torch's scaled_dot_product_attention:
-- q [B,Tq,4,8], k [B,Tk,2,8] and v [B,Tk,2,6] (grouped heads, a value width
-- other than the key width), an additive bias [bias_b,bias_h,Tq,Tk], causal
-- or not; scale left to its default 1/sqrt(8) unless cfg.scale > 0.
local lrc = require "lrc"
local M = {}
M.defaults = { vocab = 16, B = 2, tq = 5, tk = 7, bias_b = 2, bias_h = 1, causal = false, scale = 0.0, with_bias = true }
function M.build(cfg, tokens)
  local q = lrc.input("q", { cfg.B, cfg.tq, 4, 8 })
  local k = lrc.input("k", { cfg.B, cfg.tk, 2, 8 })
  local v = lrc.input("v", { cfg.B, cfg.tk, 2, 6 })
  local opt = { causal = cfg.causal }
  if cfg.with_bias then opt.bias = lrc.input("bias", { cfg.bias_b, cfg.bias_h, cfg.tq, cfg.tk }) end
  if cfg.scale > 0 then opt.scale = cfg.scale end
  local y = lrc.attention(q, k, v, opt)
  return lrc.reshape(y, { cfg.B, cfg.tq, 24 })
end
return M
