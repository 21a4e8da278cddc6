-- recurrence64.lua — a linear recurrence unrolled over the positions:
-- h = a_t * h + b_t for t = 1 .. T (T = 64 in tests/cli/many_buffers.sh),
-- a_t and b_t the slices at position t of [B, T, d] tensors, h [B, 1, d];
-- the chain fuses into kernels of many arguments.
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = {}
M.defaults = { d = 8, vocab = 32 }
function M.build(cfg, tokens)
  local a = nn.embedding("a", cfg.vocab, cfg.d)(tokens):sigmoid() -- [B, T, d], in (0, 1): h stays bounded
  local b = nn.embedding("b", cfg.vocab, cfg.d)(tokens)
  local h = lrc.param("h0", { cfg.d }, { "normal", std = 1 })
  for t = 0, tokens.shape[2] - 1 do
    local at = lrc.slice(a, { axis = 1, start = t, size = 1 })
    local bt = lrc.slice(b, { axis = 1, start = t, size = 1 })
    h = at * h + bt
  end
  return nn.linear("lm_head", cfg.d, cfg.vocab)(h) -- [B, 1, vocab]
end
return M
