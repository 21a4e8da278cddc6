-- parallel_residual.lua — h + l1(h) + l2(h), both linears with biases: the
-- gradients of l1 and l2 are the same expression (the same input, the same
-- upstream gradient), which cse merges into one node (issue 49).
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = {}
M.defaults = { d = 16, vocab = 256 }
function M.build(cfg, tokens)
  local h = nn.embedding("embed", cfg.vocab, cfg.d)(tokens)
  h = h + nn.linear("l1", cfg.d, cfg.d, {bias = true})(h) + nn.linear("l2", cfg.d, cfg.d, {bias = true})(h)
  return nn.linear("lm_head", cfg.d, cfg.vocab)(h)
end
return M
