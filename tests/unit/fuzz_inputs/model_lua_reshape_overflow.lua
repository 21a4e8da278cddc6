-- ir/ops.c's reshape rule multiplies the sizes unchecked: signed overflow (UBSan)
local lrc = require "lrc"
local nn = require "lrc.nn"
return { defaults = { vocab = 16, d = 8 }, build = function(cfg, tokens)
  local h = nn.embedding("embed", cfg.vocab, cfg.d)(tokens)
  return lrc.reshape(h, { 9223372036854775807, 256 })
end }
