-- GPT-2, with Hugging Face's parameter names: learned position embeddings,
-- pre-LayerNorm blocks with gains and biases, one c_attn projection for q, k
-- and v, the tanh GELU, and the head tied to the token embeddings. Its
-- Conv1D layers store weights [in, out] (nn.Linear's transposed), which
-- the matmuls read through a transpose.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "GPT-2 decoder (Hugging Face gpt2 layout)"

M.defaults = {
  d_model = 64, n_layers = 2, n_heads = 4, d_ff = 0, vocab = 256, n_positions = 1024, eps = 1e-5,
  act = "gelu_tanh",
}

M.presets = {
  tiny = { d_model = 32, n_layers = 2, n_heads = 2, n_positions = 256 },
  small = { d_model = 768, n_layers = 12, n_heads = 12, vocab = 50257 },
}

local acts = { gelu_tanh = lrc.gelu_tanh, gelu = lrc.gelu, relu = lrc.relu, silu = lrc.silu }

-- y = x W + b for a Conv1D weight W [d_in, d_out]
local function conv1d(name, d_in, d_out)
  local w = lrc.param(name .. ".weight", { d_in, d_out }, { "normal", std = 0.02 }, "linear")
  local b = lrc.param(name .. ".bias", { d_out }, "zeros", "linear")
  return function(x) return lrc.matmul(x, lrc.transpose(w, { 1, 0 })) + b end
end

local function layernorm(name, d, eps)
  local w = lrc.param(name .. ".weight", { d }, "ones", "norm")
  local b = lrc.param(name .. ".bias", { d }, "zeros", "norm")
  return function(x) return lrc.layernorm(x, { eps = eps }) * w + b end
end

function M.build(cfg, tokens)
  for _, k in ipairs({ "d_model", "n_layers", "n_heads", "vocab", "n_positions" }) do nn.positive_int(cfg[k], k) end
  local d, H = cfg.d_model, cfg.n_heads
  if d % H ~= 0 then error(string.format("n_heads (%d) must divide d_model (%d)", H, d)) end
  if not acts[cfg.act] then error(string.format("act must be gelu_tanh, gelu, relu or silu, got '%s'", cfg.act)) end
  local B, T, dh = tokens.shape[1], tokens.shape[2], d // H
  if T > cfg.n_positions then
    error(string.format("a sequence of %d is longer than the %d learned positions (n_positions)", T, cfg.n_positions))
  end
  local d_ff = cfg.d_ff > 0 and cfg.d_ff or 4 * d
  local wte = nn.embedding("transformer.wte", cfg.vocab, d)
  local wpe = lrc.param("transformer.wpe.weight", { cfg.n_positions, d }, { "normal", std = 0.01 }, "embedding")
  local h = wte(tokens) + lrc.slice(wpe, { axis = 0, start = 0, size = T, positions = true })
  for l = 0, cfg.n_layers - 1 do
    local p = "transformer.h." .. l
    local ln1, ln2 = layernorm(p .. ".ln_1", d, cfg.eps), layernorm(p .. ".ln_2", d, cfg.eps)
    local c_attn, c_proj = conv1d(p .. ".attn.c_attn", d, 3 * d), conv1d(p .. ".attn.c_proj", d, d)
    local c_fc, m_proj = conv1d(p .. ".mlp.c_fc", d, d_ff), conv1d(p .. ".mlp.c_proj", d_ff, d)
    local qkv = c_attn(ln1(h))
    local function part(i)
      return lrc.reshape(lrc.slice(qkv, { axis = 2, start = i * d, size = d }), { B, T, H, dh })
    end
    local y = lrc.attention(part(0), part(1), part(2), { causal = true, scale = 1 / math.sqrt(dh) })
    h = h + c_proj(lrc.reshape(y, { B, T, d }))
    h = h + m_proj(acts[cfg.act](c_fc(ln2(h))))
  end
  h = layernorm("transformer.ln_f", d, cfg.eps)(h)
  local logits = lrc.matmul(h, wte.weight) -- the head is the embedding matrix
  return logits
end

-- Hugging Face configs (lrc.hf); absent keys take transformers 4.44's defaults.
M.from_hf = {}

function M.from_hf.gpt2(r)
  local cfg = {
    d_model = r:positive_int("n_embd", 768),
    n_layers = r:positive_int("n_layer", 12),
    n_heads = r:positive_int("n_head", 12),
    vocab = r:positive_int("vocab_size", 50257),
    n_positions = r:positive_int("n_positions", 1024),
    eps = r:number("layer_norm_epsilon", 1e-5),
  }
  if r:has("n_inner") then cfg.d_ff = r:positive_int("n_inner") end
  local act = r:one_of("activation_function", { "gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "silu" }, "gelu_new")
  cfg.act = (act == "gelu_new" or act == "gelu_pytorch_tanh") and "gelu_tanh" or act
  r:only("scale_attn_weights", true)
  r:only("scale_attn_by_inverse_layer_idx", false)
  if not r:bool("tie_word_embeddings", true) then
    r:fail("tie_word_embeddings", "GPT-2's head is its token embedding matrix in lrc")
  end
  -- upcasting only changes a half-precision model's rounding; lrc computes in f32
  r:get("reorder_and_upcast_attn")
  -- dropout is training-time noise (off in transformers' eval mode, which
  -- the logits are); lrc trains without dropout
  for _, k in ipairs({ "attn_pdrop", "embd_pdrop", "resid_pdrop", "summary_first_dropout" }) do r:get(k) end
  -- the sequence-summary head of GPT2DoubleHeadsModel, not the language model
  for _, k in ipairs({ "summary_activation", "summary_proj_to_labels", "summary_type", "summary_use_proj",
    "task_specific_params", "n_ctx" }) do r:get(k) end
  return cfg
end

return M
