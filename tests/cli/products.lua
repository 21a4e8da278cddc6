-- products.lua — a small model on bmm, cast, arange and a slice of i32
-- (ctest products_torch): attention written out with bmm over [B, H, T, T]
-- scores, a causal mask from arange cast to f32, a position feature from
-- arange, the previous token's id by an i32 slice, and a bmm whose weight
-- broadcasts over the batch; tests/reference/products_ref.py is the same
-- in PyTorch.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = { defaults = { d_model = 8, vocab = 32 }, presets = {} }

function M.build(cfg, tokens)
  local d, B, T, H = cfg.d_model, tokens.shape[1], tokens.shape[2], 2
  local w = { init = { "normal", std = 0.5 } }
  local x = nn.embedding("embed", cfg.vocab, d)(tokens)
  -- the token before each one (0 first): i32 slices that pad, then narrow
  -- (two, so that a one-token build, as init's, still hits a position)
  local prev = lrc.slice(lrc.slice(tokens, { axis = 1, start = -1, size = T + 1 }), { axis = 1, start = 0, size = T })
  x = x + nn.embedding("prev", cfg.vocab, d)(prev)
  local pos = lrc.cast(lrc.arange(T), "f32")
  x = x + lrc.reshape(pos, { T, 1 }) * 0.1
  local heads = function(v) return lrc.transpose(lrc.reshape(v, { B, T, H, d / H }), { 0, 2, 1, 3 }) end
  local q, k, v = heads(nn.linear("q", d, d, w)(x)), heads(nn.linear("k", d, d, w)(x)), heads(nn.linear("v", d, d, w)(x))
  -- key j visible from query i where j <= i: 0 there, -1e9 elsewhere
  local i = lrc.reshape(pos, { T, 1 })
  local mask = (lrc.gt(pos, i) * -1e9)
  local s = q:bmm(lrc.transpose(k, { 0, 1, 3, 2 })) * (1 / math.sqrt(d / H)) + mask
  local y = lrc.reshape(lrc.transpose(lrc.softmax(s):bmm(v), { 0, 2, 1, 3 }), { B, T, d })
  -- a [1, d, d] weight broadcast over the batch
  local m = lrc.param("mix", { 1, d, d }, { "normal", std = 0.3 })
  y = y + lrc.bmm(x, m)
  return nn.linear("head", d, cfg.vocab, { init = { "normal", std = 0.3 } })(y)
end

return M
