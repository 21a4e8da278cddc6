-- Gemma and Gemma 2, with Hugging Face's parameter names. Both scale the
-- embeddings by sqrt(d_model), normalize with RMSNorm times (1 + w) (its
-- weights start at 0) and use GeGLU with the tanh GELU. Gemma 2 adds a norm
-- after each block too (the paper's Peri-Norm: four per layer), soft-caps
-- the attention logits and the final logits (c tanh(x / c)), attends within
-- a sliding window on every other layer (0, 2, 4, ...) and scales attention
-- by query_pre_attn_scalar^-1/2.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "Gemma / Gemma 2 decoder; variant = gemma | gemma2"

M.defaults = {
  variant = "gemma2", d_model = 64, n_layers = 2, n_heads = 4, n_kv_heads = 2, head_dim = 16, d_ff = 128,
  vocab = 256, eps = 1e-6, rope_base = 10000.0, act = "gelu_tanh", attention_bias = false,
  tie_embeddings = true,
  attn_softcap = 50.0,         -- gemma2; 0: off
  final_softcap = 30.0,        -- gemma2; 0: off
  sliding_window = 16,         -- gemma2's even layers; 0: none
  query_pre_attn_scalar = 0.0, -- gemma2; 0: head_dim
}

M.presets = {
  tiny = { d_model = 32, n_layers = 2, n_heads = 2, n_kv_heads = 1, head_dim = 16, d_ff = 64 },
}

local acts = { gelu_tanh = lrc.gelu_tanh, gelu = lrc.gelu, silu = lrc.silu }

local function validate(cfg)
  for _, k in ipairs({ "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab" }) do
    nn.positive_int(cfg[k], k)
  end
  if cfg.variant ~= "gemma" and cfg.variant ~= "gemma2" then
    error(string.format("variant must be gemma or gemma2, got '%s'", cfg.variant))
  end
  if not acts[cfg.act] then error(string.format("act must be gelu_tanh, gelu or silu, got '%s'", cfg.act)) end
  for _, k in ipairs({ "attn_softcap", "final_softcap", "query_pre_attn_scalar" }) do
    if not (cfg[k] >= 0) then error(string.format("%s must be >= 0 (0: off), got %s", k, tostring(cfg[k]))) end
  end
  if math.type(cfg.sliding_window) ~= "integer" or cfg.sliding_window < 0 then
    error(string.format("sliding_window must be an integer >= 0, got %s", tostring(cfg.sliding_window)))
  end
end

function M.build(cfg, tokens)
  validate(cfg)
  local d, g2 = cfg.d_model, cfg.variant == "gemma2"
  -- Gemma's RMSNorm: N(x) (1 + w) = N(x) + N(x) w
  local function norm(name)
    local w = lrc.param(name .. ".weight", { d }, "zeros", "norm")
    return function(x)
      local y = lrc.rmsnorm(x, { eps = cfg.eps })
      return y + y * w
    end
  end
  local embed = nn.embedding("model.embed_tokens", cfg.vocab, d)
  local h = embed(tokens) * math.sqrt(d)
  local scalar = cfg.query_pre_attn_scalar > 0 and cfg.query_pre_attn_scalar or cfg.head_dim
  for l = 0, cfg.n_layers - 1 do
    local p = "model.layers." .. l
    local attn = nn.attention(p .. ".self_attn", d, cfg.n_heads, {
      n_kv_heads = cfg.n_kv_heads, head_dim = cfg.head_dim, rope_base = cfg.rope_base,
      bias = cfg.attention_bias, o_bias = cfg.attention_bias,
      scale = g2 and scalar ^ -0.5 or nil, softcap = g2 and cfg.attn_softcap or 0,
      window = (g2 and l % 2 == 0) and cfg.sliding_window or 0,
    })
    local mlp = nn.swiglu(p .. ".mlp", d, cfg.d_ff, { act = acts[cfg.act] })
    if g2 then
      local n_in, n_post = norm(p .. ".input_layernorm"), norm(p .. ".post_attention_layernorm")
      local n_pre, n_out = norm(p .. ".pre_feedforward_layernorm"), norm(p .. ".post_feedforward_layernorm")
      h = h + n_post(attn(n_in(h)))
      h = h + n_out(mlp(n_pre(h)))
    else
      local n_in, n_mlp = norm(p .. ".input_layernorm"), norm(p .. ".post_attention_layernorm")
      h = h + attn(n_in(h))
      h = h + mlp(n_mlp(h))
    end
  end
  h = norm("model.norm")(h)
  local logits
  if cfg.tie_embeddings then
    logits = lrc.matmul(h, embed.weight)
  else
    logits = nn.linear("lm_head", d, cfg.vocab, { group = "head" })(h)
  end
  if g2 and cfg.final_softcap > 0 then
    logits = lrc.tanh(logits / cfg.final_softcap) * cfg.final_softcap
  end
  return logits
end

-- Hugging Face configs (lrc.hf); absent keys take transformers 4.44's defaults.
local function hf_common(r, variant)
  local cfg = {
    variant = variant,
    d_model = r:positive_int("hidden_size"),
    n_layers = r:positive_int("num_hidden_layers"),
    n_heads = r:positive_int("num_attention_heads"),
    d_ff = r:positive_int("intermediate_size"),
    vocab = r:positive_int("vocab_size"),
    head_dim = r:positive_int("head_dim", 256),
    eps = r:number("rms_norm_eps", 1e-6),
    rope_base = r:number("rope_theta", 10000.0),
    tie_embeddings = r:bool("tie_word_embeddings", true),
    attention_bias = r:bool("attention_bias", false),
  }
  cfg.n_kv_heads = r:positive_int("num_key_value_heads", 16) -- both classes' default
  if cfg.n_heads % cfg.n_kv_heads ~= 0 then
    r:fail("num_key_value_heads", "must divide num_attention_heads = %d", cfg.n_heads)
  end
  -- transformers 4.44 takes hidden_activation and ignores hidden_act (gemma:
  -- gelu_pytorch_tanh when hidden_activation is unset)
  r:get("hidden_act")
  local act = r:one_of("hidden_activation", { "gelu_pytorch_tanh", "gelu", "silu" }, "gelu_pytorch_tanh")
  cfg.act = act == "gelu_pytorch_tanh" and "gelu_tanh" or act
  r:only("attention_dropout", 0)
  if r:object("rope_scaling") then
    r:fail("rope_scaling", "lrc implements no rope scaling yet (remove the key for unscaled RoPE)")
  end
  return cfg
end

M.from_hf = {}

function M.from_hf.gemma(r)
  return hf_common(r, "gemma")
end

function M.from_hf.gemma2(r)
  local cfg = hf_common(r, "gemma2")
  -- null turns a soft-cap off; absent is the class default
  local function cap(key, default)
    if r:is_null(key) then
      r:get(key)
      return 0.0
    end
    local v = r:number(key, default)
    if not (v > 0) then r:fail(key, "expected a positive number or null") end
    return v
  end
  cfg.attn_softcap = cap("attn_logit_softcapping", 50.0)
  cfg.final_softcap = cap("final_logit_softcapping", 30.0)
  cfg.query_pre_attn_scalar = r:number("query_pre_attn_scalar", 224.0)
  if not (cfg.query_pre_attn_scalar > 0) then r:fail("query_pre_attn_scalar", "expected a positive number") end
  if r:is_null("sliding_window") then
    r:fail("sliding_window", "transformers 4.44's gemma2 needs a window for its even layers")
  end
  cfg.sliding_window = r:positive_int("sliding_window", 4096)
  r:one_of("cache_implementation", { "hybrid" }, "hybrid")
  return cfg
end

return M
