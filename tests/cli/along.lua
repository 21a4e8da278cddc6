-- along.lua — every op along one axis in one small language model (ctest
-- along_torch): reductions over the batch, sequence and feature axes, with
-- and without keepdim, over every element, softmax over the sequence, cumsum both ways, expand,
-- concat (of more inputs than one concat node takes) and stack;
-- tests/reference/along_ref.py is the same in PyTorch.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = { defaults = { d_model = 8, vocab = 32 }, presets = {} }

function M.build(cfg, tokens)
  local d = cfg.d_model
  local x = nn.embedding("embed", cfg.vocab, d)(tokens)
  local B, T = x.shape[1], x.shape[2]
  local s = lrc.sum(x, { axis = 1, keepdim = true })          -- [B, 1, d]
  local m = lrc.mean(x, { axis = -1, keepdim = true })        -- [B, T, 1]
  local a = lrc.amax(x, { axis = 0, keepdim = true })         -- [1, T, d]
  local l = lrc.logsumexp(x, { axis = 1, keepdim = true })    -- [B, 1, d]
  local p = lrc.amax(lrc.mean(x, { axis = 2 }), { axis = 1 }) -- [B]
  local g = lrc.sum(x)                                        -- [], every element
  local ga = lrc.amax(x, { keepdim = true })                  -- [1, 1, 1]
  -- x again, from its d features as one-wide slices: a concat of more than
  -- the IR's LRC_MAX_INPUTS (7), which lrc.concat chains
  local parts = {}
  for i = 1, d do parts[i] = lrc.slice(x, { axis = 2, start = i - 1, size = 1 }) end
  local xr = lrc.concat(parts, { axis = -1 })
  local u = lrc.concat({
    lrc.softmax(x, { axis = 1 }),
    lrc.cumsum(xr, { axis = 1 }),
    lrc.expand(s + l + g, { -1, T, -1 }),
  }, { axis = -1 })                                           -- [B, T, 3d]
  local st = lrc.stack({
    lrc.cumsum(x, { axis = -1, reverse = true }),
    lrc.expand(m, { B, T, d }) * lrc.expand(lrc.reshape(p, { B, 1, 1 }), { B, T, d }),
    lrc.expand(a * ga, x.shape),
  }, { axis = 2 })                                            -- [B, T, 3, d]
  local h = lrc.concat({ u, lrc.reshape(st, { B, T, 3 * d }) }, { axis = 2 })
  return nn.linear("head", 6 * d, cfg.vocab, { init = { "normal", std = 0.3 } })(h)
end

return M
