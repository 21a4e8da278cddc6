-- Whisper's text decoder (Hugging Face WhisperForCausalLM names): pre-LayerNorm
-- blocks of causal self-attention, cross-attention to the encoder's states
-- and a GELU MLP, learned positions, and the output projection tied to the
-- token embeddings. The encoder's output is the run-time input
-- `encoder_states` (F32 [B, enc_len, d_model]); cross-attention is
-- lrc.attention with Tq (the decoder's T) != Tk (enc_len), keys and values
-- projected from the raw encoder states, no mask. Primitives: embedding,
-- a slice of the position table, layernorm with gains and biases, linear
-- maps (k_proj without a bias), lrc.attention causal and cross, the erf GELU.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "Whisper decoder with cross-attention to encoder states (Hugging Face whisper layout)"

M.defaults = {
  d_model = 256, n_layers = 2, n_heads = 4, d_ff = 1024, vocab = 256, n_positions = 448, enc_len = 64, eps = 1e-5,
}

M.presets = {}

local function layernorm(name, d, eps)
  local w = lrc.param(name .. ".weight", { d }, "ones", "norm")
  local b = lrc.param(name .. ".bias", { d }, "zeros", "norm")
  return function(x) return lrc.layernorm(x, { eps = eps }) * w + b end
end

-- Whisper's attention: q, v and out_proj with biases, k_proj without; q
-- [B, Tq, H, dh] from x, k and v [B, Tk, H, dh] from kv_src (nil: x itself)
local function attention(prefix, x, kv_src, H, causal)
  kv_src = kv_src or x
  local B, Tq, d, Tk = x.shape[1], x.shape[2], x.shape[3], kv_src.shape[2]
  local dh = d // H
  local q = nn.linear(prefix .. ".q_proj", d, d, { bias = true })(x)
  local k = nn.linear(prefix .. ".k_proj", d, d)(kv_src)
  local v = nn.linear(prefix .. ".v_proj", d, d, { bias = true })(kv_src)
  local y = lrc.attention(lrc.reshape(q, { B, Tq, H, dh }), lrc.reshape(k, { B, Tk, H, dh }), lrc.reshape(v, { B, Tk, H, dh }),
    { causal = causal, scale = 1 / math.sqrt(dh) })
  return nn.linear(prefix .. ".out_proj", d, d, { bias = true })(lrc.reshape(y, { B, Tq, d }))
end

function M.build(cfg, tokens)
  for _, k in ipairs({ "d_model", "n_layers", "n_heads", "d_ff", "vocab", "n_positions", "enc_len" }) do
    nn.positive_int(cfg[k], k)
  end
  local d, H = cfg.d_model, cfg.n_heads
  if d % H ~= 0 then error(string.format("n_heads (%d) must divide d_model (%d)", H, d)) end
  local B, T = tokens.shape[1], tokens.shape[2]
  if T > cfg.n_positions then
    error(string.format("a sequence of %d is longer than the %d learned positions (n_positions)", T, cfg.n_positions))
  end
  local enc = lrc.input("encoder_states", { B, cfg.enc_len, d }, "f32", { default = 0 })
  local p = "model.decoder"
  local embed = nn.embedding(p .. ".embed_tokens", cfg.vocab, d)
  local pos = lrc.param(p .. ".embed_positions.weight", { cfg.n_positions, d }, { "normal", std = 0.02 }, "embedding")
  local x = embed(tokens) + lrc.slice(pos, { axis = 0, start = 0, size = T, positions = true })
  for l = 0, cfg.n_layers - 1 do
    local a = p .. ".layers." .. l
    x = x + attention(a .. ".self_attn", layernorm(a .. ".self_attn_layer_norm", d, cfg.eps)(x), nil, H, true)
    x = x + attention(a .. ".encoder_attn", layernorm(a .. ".encoder_attn_layer_norm", d, cfg.eps)(x), enc, H, false)
    local h = layernorm(a .. ".final_layer_norm", d, cfg.eps)(x)
    x = x + nn.linear(a .. ".fc2", cfg.d_ff, d, { bias = true })(lrc.gelu(nn.linear(a .. ".fc1", d, cfg.d_ff, { bias = true })(h)))
  end
  x = layernorm(p .. ".layer_norm", d, cfg.eps)(x)
  return lrc.matmul(x, embed.weight) -- proj_out is the token embeddings
end

return M
