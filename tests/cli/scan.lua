-- scan.lua — a minimal linear-recurrence language model on lrc.scan (ctest
-- scan_torch): a data-dependent decay per channel, h_t = decay_t h_{t-1} +
-- (1 - decay_t) u_t over the sequence, gated; beside it a reversed scan over
-- the sequence from an init and a scan over the features, so that every
-- form of the op and its gradient meets PyTorch; tests/reference/scan_ref.py
-- is the same in PyTorch.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = { defaults = { d_model = 8, vocab = 32 }, presets = {} }

function M.build(cfg, tokens)
  local d = cfg.d_model
  local w = { init = { "normal", std = 0.5 } }
  local x = nn.embedding("embed", cfg.vocab, d)(tokens)
  local z = nn.linear("decay", d, d, w)(x)
  local u = nn.linear("in", d, d, w)(x)
  local h = lrc.scan(lrc.sigmoid(z), lrc.sigmoid(-z) * u, { axis = 1 })
  local r = lrc.sigmoid(u):scan(x, { axis = 1, reverse = true, init = lrc.mean(x, { axis = 1 }) })
  local f = lrc.scan(lrc.tanh(x), u, { axis = -1 })
  return nn.linear("head", d, cfg.vocab, { init = { "normal", std = 0.3 } })(h * lrc.silu(x) + r + f)
end

return M
