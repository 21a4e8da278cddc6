-- ir/ops.c's slice rule adds start + size unchecked: signed overflow (UBSan)
local lrc = require "lrc"
local nn = require "lrc.nn"
return { defaults = { vocab = 16, d = 8 }, build = function(cfg, tokens)
  local h = nn.embedding("embed", cfg.vocab, cfg.d)(tokens)
  return lrc.slice(h, { axis = 1, start = 9223372036854775807, size = 1 })
end }
