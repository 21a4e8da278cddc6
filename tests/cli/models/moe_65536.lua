-- moe_65536.lua — a mixture of 65536 experts by default: 1.4e11 parameters,
-- 554 GB in f32, more than any machine the tests run on holds. Building it
-- once went on for minutes; lrc now refuses the parameter that passes the
-- machine's memory, at once (tests/cli/size_bounds.sh).
local nn = require "lrc.nn"
local M = {}
M.defaults = { d = 512, d_ff = 1376, n_experts = 65536, k = 2, vocab = 256 }
function M.build(cfg, tokens)
  local h = nn.embedding("embed", cfg.vocab, cfg.d)(tokens)
  h = h + nn.moe("moe", cfg.d, cfg.d_ff, cfg.n_experts, cfg.k)(h)
  return nn.linear("lm_head", cfg.d, cfg.vocab)(h)
end
return M
