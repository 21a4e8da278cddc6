-- many_buffers.lua — one elementwise group that reads far more than 64
-- buffers: an embedding plus n parameter vectors added one after another,
-- which fusion makes a single kernel of n + 2 arguments (the plan's launch
-- once copied its arguments into 64 slots and crashed). tests/cli/many_buffers.sh
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = {}
M.defaults = { d = 16, n = 150, vocab = 32 }
function M.build(cfg, tokens)
  local h = nn.embedding("embed", cfg.vocab, cfg.d)(tokens)
  for i = 1, cfg.n do h = h + lrc.param("p" .. i, { cfg.d }, { "normal", std = 0.1 }) end
  return nn.linear("lm_head", cfg.d, cfg.vocab)(h)
end
return M
