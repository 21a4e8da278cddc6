-- LLaMA-style decoder with every normalization placement of the LayerRoPE
-- paper (docs/models.md): pre, post, peri, lns, deepnet, layerrope,
-- layerrope_peri.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "LLaMA-style decoder; norm = pre | post | peri | lns | deepnet | layerrope | layerrope_peri"

M.defaults = {
  d_model = 512, n_layers = 8, n_heads = 8, d_ff = 1376, vocab = 32000,
  norm = "pre", eps = 1e-6, rope_base = 10000.0,
  layerrope_alpha = 0.0, layerrope_beta = -0.5,
  layerrope_alpha_rot = 0.0, layerrope_beta_rot = -0.5,
  layerrope_base = 100.0,
  deepnet_depth_alpha = false,
  -- the Hugging Face llama, mistral and qwen2 variants (docs/huggingface.md)
  n_kv_heads = 0,          -- grouped key-value heads; 0: n_heads
  head_dim = 0,            -- 0: d_model / n_heads
  tie_embeddings = false,  -- lm_head is the embedding matrix
  qkv_bias = false,        -- biases on q_proj, k_proj, v_proj
  o_bias = false,
  mlp_bias = false,
  sliding_window = 0,      -- each position attends to the last W; 0: all
  fused_proj = false,      -- one qkv_proj and one gate_up_proj (Phi-3)
  plain_layernorm = false, -- LayerNorm without parameters instead of RMSNorm (OLMo; norm = pre)
  -- a sparse mixture of experts in place of the MLP (Mixtral): n_experts
  -- SwiGLU experts of width d_ff, each row routed to experts_per_tok of them
  n_experts = 0, experts_per_tok = 2,
  -- RoPE scaling (lrc.rope): rope_factor 1 is none; with rope_orig_ctx 0 it
  -- is linear (positions / factor), else Llama 3's between rope_low_freq
  -- and rope_high_freq
  rope_factor = 1.0, rope_low_freq = 0.0, rope_high_freq = 0.0, rope_orig_ctx = 0.0,
}

M.presets = {
  ["60m"] = { d_model = 512, n_layers = 8, n_heads = 8, d_ff = 1376, vocab = 32000 },
  ["130m"] = { d_model = 768, n_layers = 12, n_heads = 12, d_ff = 2048, vocab = 32000 },
  ["250m"] = { d_model = 896, n_layers = 20, n_heads = 14, d_ff = 2389, vocab = 32000 },
  ["500m"] = { d_model = 1280, n_layers = 24, n_heads = 20, d_ff = 3413, vocab = 32000 },
  ["1b"] = { d_model = 2048, n_layers = 24, n_heads = 32, d_ff = 5461, vocab = 32000 },
  -- byte-level models for tests and for training on this machine
  tiny = { d_model = 32, n_layers = 2, n_heads = 2, d_ff = 88, vocab = 256 },
  small = { d_model = 128, n_layers = 4, n_heads = 4, d_ff = 352, vocab = 256 },
}
-- The depth study: a narrow backbone, LayerRoPE with beta = beta_rot = 0 and b = 1e4.
for _, L in ipairs({ 48, 96, 192, 256, 384, 512 }) do
  M.presets["depth-L" .. L] = {
    d_model = 128, n_layers = L, n_heads = 4, d_ff = 352, vocab = 32000,
    layerrope_beta = 0.0, layerrope_beta_rot = 0.0, layerrope_base = 10000.0,
  }
end

local placements = {
  pre = true, post = true, peri = true, lns = true, deepnet = true,
  layerrope = true, layerrope_peri = true,
}

local function validate(cfg)
  for _, k in ipairs({ "d_model", "n_layers", "n_heads", "d_ff", "vocab" }) do
    nn.positive_int(cfg[k], k)
  end
  if not placements[cfg.norm] then
    error(string.format("norm must be one of pre, post, peri, lns, deepnet, layerrope, layerrope_peri; got '%s'",
      cfg.norm))
  end
  for _, k in ipairs({ "n_kv_heads", "head_dim", "sliding_window", "n_experts" }) do
    if math.type(cfg[k]) ~= "integer" or cfg[k] < 0 then
      error(string.format("%s must be a non-negative integer (0: the default), got %s", k, tostring(cfg[k])))
    end
  end
  if cfg.n_experts > 0 then
    nn.positive_int(cfg.experts_per_tok, "experts_per_tok")
    if cfg.experts_per_tok > cfg.n_experts then
      error(string.format("experts_per_tok (%d) must not exceed n_experts (%d)", cfg.experts_per_tok, cfg.n_experts))
    end
    if cfg.mlp_bias or cfg.fused_proj then error("a mixture of experts (n_experts > 0) has no mlp_bias or fused_proj") end
  end
  if cfg.head_dim == 0 and cfg.d_model % cfg.n_heads ~= 0 then
    error(string.format("n_heads (%d) must divide d_model (%d)", cfg.n_heads, cfg.d_model))
  end
  if cfg.norm:match("^layerrope") and cfg.d_model % 2 ~= 0 then
    error(string.format("LayerRoPE pairs features (2j, 2j+1), so d_model must be even, got %d", cfg.d_model))
  end
  for _, k in ipairs({ "eps", "rope_base", "layerrope_base" }) do
    if not (cfg[k] > 0) then error(string.format("%s must be positive, got %s", k, tostring(cfg[k]))) end
  end
end

function M.build(cfg, tokens)
  validate(cfg)
  local d, L, norm = cfg.d_model, cfg.n_layers, cfg.norm
  if cfg.plain_layernorm and norm ~= "pre" then
    error(string.format("plain_layernorm has no gains to place, so norm must be pre, got '%s'", norm))
  end
  local function N(x)
    if cfg.plain_layernorm then return lrc.layernorm(x, { eps = cfg.eps }) end
    return lrc.rmsnorm(x, { eps = cfg.eps })
  end

  -- DeepNet: residual up-weighting and down-scaled xavier init of v, o, gate, up, down.
  local deepnet = norm == "deepnet"
  local alpha = cfg.deepnet_depth_alpha and (2 * L) ^ 0.25 or (2 * 32) ^ 0.25
  local deep_gain = (8 * L) ^ -0.25
  local init_qk = deepnet and { "xavier_normal", gain = 1.0 } or nil
  local init_small = deepnet and { "xavier_normal", gain = deep_gain } or nil

  local embed = nn.embedding("model.embed_tokens", cfg.vocab, d, { init = { "normal", std = math.sqrt(2 / 5) } })

  local rope = nil
  if norm == "layerrope" or norm == "layerrope_peri" then
    rope = nn.layerrope_sites("model.layerrope", d, cfg)
  end

  local function gain(prefix, name) -- a per-layer norm weight
    return lrc.param(prefix .. "." .. name .. ".weight", { d }, "ones", "norm")
  end
  local read_name = { attn = "input_layernorm", mlp = "post_attention_layernorm" }
  local post_name = { attn = "post_attention_layernorm", mlp = "post_feedforward_layernorm" }
  local peri_name = { attn = "post_block_norm_attn", mlp = "post_block_norm_mlp" }

  -- The multipliers a block reads its input and writes its output with,
  -- named for lrc diagnose (lrc.tap: no effect on the graph).
  local function read_gain(g, kind, l) return lrc.tap("read." .. kind .. "." .. l, g) end
  local function write_gain(g, kind, l) return lrc.tap("write." .. kind .. "." .. l, g) end

  -- One residual half-step h -> h' around block F (attention or MLP).
  local function half_step(h, F, kind, l, prefix)
    if norm == "pre" and cfg.plain_layernorm then
      return h + F(N(h))
    elseif norm == "pre" then
      return h + F(N(h) * read_gain(gain(prefix, read_name[kind]), kind, l))
    elseif norm == "lns" then
      return h + F(N(h) * read_gain(gain(prefix, read_name[kind]) * (1 / math.sqrt(l + 1)), kind, l))
    elseif norm == "post" then
      return N(h + F(h)) * gain(prefix, post_name[kind])
    elseif norm == "deepnet" then
      return N(h * alpha + F(h)) * gain(prefix, post_name[kind])
    elseif norm == "peri" then
      local w_in = read_gain(gain(prefix, read_name[kind]), kind, l)
      return h + N(F(N(h) * w_in)) * write_gain(gain(prefix, peri_name[kind]), kind, l)
    elseif norm == "layerrope" then
      return h + F(N(h) * read_gain(rope["in_" .. kind]:gain(l), kind, l)) * write_gain(rope["out_" .. kind]:gain(l), kind, l)
    else -- layerrope_peri
      return h + N(F(N(h) * read_gain(rope["in_" .. kind]:gain(l), kind, l))) * write_gain(rope["out_" .. kind]:gain(l), kind, l)
    end
  end

  local h = embed(tokens)
  for l = 0, L - 1 do
    local prefix = "model.layers." .. l
    local attn = nn.attention(prefix .. ".self_attn", d, cfg.n_heads, {
      rope_base = cfg.rope_base, init_qk = init_qk, init_vo = init_small,
      n_kv_heads = cfg.n_kv_heads > 0 and cfg.n_kv_heads or nil, head_dim = cfg.head_dim > 0 and cfg.head_dim or nil,
      bias = cfg.qkv_bias, o_bias = cfg.o_bias, window = cfg.sliding_window, fused = cfg.fused_proj,
      rope_scaling = { factor = cfg.rope_factor, low_freq = cfg.rope_low_freq, high_freq = cfg.rope_high_freq,
        orig_ctx = cfg.rope_orig_ctx },
    })
    local mlp
    if cfg.n_experts > 0 then
      mlp = nn.moe(prefix .. ".block_sparse_moe", d, cfg.d_ff, cfg.n_experts, cfg.experts_per_tok,
        { init_in = init_small, init_out = init_small })
    else
      mlp = nn.swiglu(prefix .. ".mlp", d, cfg.d_ff,
        { init_in = init_small, init_out = init_small, bias = cfg.mlp_bias, fused = cfg.fused_proj })
    end
    h = half_step(h, attn, "attn", l, prefix)
    h = lrc.tap("residual." .. l, half_step(h, mlp, "mlp", l, prefix)) -- the stream after layer l
  end
  local final = cfg.plain_layernorm and N or nn.rmsnorm("model.norm", d, cfg.eps)
  local logits
  if cfg.tie_embeddings then
    logits = lrc.matmul(final(h), embed.weight)
  else
    local lm_head = nn.linear("lm_head", d, cfg.vocab, { group = "head" })
    logits = lm_head(final(h)) -- not a tail call: keeps this line in error locations
  end
  return logits
end

-- Hugging Face configs (lrc.hf): config.json's keys onto this model's.
-- Absent keys take the transformers 4.44 class defaults.

-- rope_scaling as LlamaRotaryEmbedding reads it: its type is rope_type or,
-- in older configs, type (transformers 4.44 writes both)
local function hf_rope_scaling(rs, cfg)
  local kind = rs:one_of("rope_type", { "linear", "llama3" })
  local legacy = rs:one_of("type", { "linear", "llama3" })
  if kind and legacy and kind ~= legacy then rs:fail("type", "differs from rope_type %q", kind) end
  kind = kind or legacy
  if not kind then rs:fail("rope_type", "missing: lrc implements linear and llama3") end
  cfg.rope_factor = rs:number("factor")
  if not (cfg.rope_factor >= 1) then rs:fail("factor", "expected a number of at least 1") end
  if kind == "llama3" then
    cfg.rope_low_freq = rs:number("low_freq_factor")
    cfg.rope_high_freq = rs:number("high_freq_factor")
    cfg.rope_orig_ctx = rs:positive_int("original_max_position_embeddings") + 0.0
    if not (cfg.rope_low_freq > 0 and cfg.rope_high_freq > cfg.rope_low_freq) then
      rs:fail("high_freq_factor", "expected 0 < low_freq_factor < high_freq_factor")
    end
  end
  rs:finish()
end

local function hf_common(r, defaults)
  defaults = defaults or {}
  local cfg = {
    d_model = r:positive_int("hidden_size"),
    n_layers = r:positive_int("num_hidden_layers"),
    n_heads = r:positive_int("num_attention_heads"),
    d_ff = r:positive_int("intermediate_size"),
    vocab = r:positive_int("vocab_size"),
    eps = defaults.fixed_eps or r:number("rms_norm_eps", defaults.eps),
    rope_base = r:number("rope_theta", 10000.0),
    tie_embeddings = r:bool("tie_word_embeddings", false),
    norm = "pre",
  }
  cfg.n_kv_heads = r:positive_int("num_key_value_heads", defaults.kv_heads or cfg.n_heads)
  if cfg.n_heads % cfg.n_kv_heads ~= 0 then
    r:fail("num_key_value_heads", "must divide num_attention_heads = %d", cfg.n_heads)
  end
  if r:has("head_dim") then cfg.head_dim = r:positive_int("head_dim") end
  r:one_of("hidden_act", { "silu" }, "silu")
  r:only("attention_dropout", 0)
  local rs = r:object("rope_scaling")
  if rs and not defaults.rope_scaling then
    r:fail("rope_scaling", "lrc implements rope scaling for model_type llama only (remove the key for unscaled RoPE)")
  elseif rs then
    hf_rope_scaling(rs, cfg)
  end
  return cfg
end

M.from_hf = {}

function M.from_hf.llama(r)
  local cfg = hf_common(r, { eps = 1e-6, rope_scaling = true })
  r:only("pretraining_tp", 1)
  local bias = r:bool("attention_bias", false)
  cfg.qkv_bias, cfg.o_bias = bias, bias
  cfg.mlp_bias = r:bool("mlp_bias", false)
  return cfg
end

function M.from_hf.mistral(r)
  local cfg = hf_common(r, { eps = 1e-6, kv_heads = 8 })
  -- null turns the window off; absent is the class default, 4096
  if r:is_null("sliding_window") then
    r:get("sliding_window")
  else
    cfg.sliding_window = r:positive_int("sliding_window", 4096)
  end
  return cfg
end

function M.from_hf.mixtral(r)
  local cfg = hf_common(r, { eps = 1e-5, kv_heads = 8 })
  cfg.n_experts = r:positive_int("num_local_experts", 8)
  cfg.experts_per_tok = r:positive_int("num_experts_per_tok", 2)
  if cfg.experts_per_tok > cfg.n_experts then
    r:fail("num_experts_per_tok", "must not exceed num_local_experts = %d", cfg.n_experts)
  end
  if r:bool("output_router_logits", false) then
    r:fail("output_router_logits", "lrc does not add the router's auxiliary loss to the loss (set it false)")
  end
  r:get("router_aux_loss_coef") -- read only with output_router_logits
  r:only("router_jitter_noise", 0) -- noise on the router's inputs in training
  -- transformers 4.44 applies Mixtral's sliding_window only with flash
  -- attention; its eager and sdpa attention (the reference here) attend to
  -- every earlier position, and so does lrc (as for phi3)
  r:get("sliding_window")
  return cfg
end

function M.from_hf.phi3(r)
  local cfg = hf_common(r, { eps = 1e-5 })
  cfg.fused_proj = true
  r:only("resid_pdrop", 0)
  r:only("embd_pdrop", 0)
  r:get("original_max_position_embeddings") -- read only with rope_scaling
  -- transformers 4.44 applies Phi-3's sliding_window only with flash
  -- attention; its eager and sdpa attention (the reference here) attend to
  -- every earlier position, and so does lrc
  r:get("sliding_window")
  return cfg
end

function M.from_hf.olmo(r)
  -- OLMo's norm is F.layer_norm(x, eps = 1e-5) with no weight or bias
  local cfg = hf_common(r, { fixed_eps = 1e-5 })
  cfg.plain_layernorm = true
  local bias = r:bool("attention_bias", false)
  cfg.qkv_bias, cfg.o_bias = bias, bias
  if r:has("clip_qkv") then r:fail("clip_qkv", "lrc does not implement clipping q, k and v") end
  return cfg
end

function M.from_hf.qwen2(r)
  local cfg = hf_common(r, { eps = 1e-6, kv_heads = 32 })
  cfg.qkv_bias = true
  if r:bool("use_sliding_window", false) then
    r:fail("use_sliding_window", "lrc does not implement qwen2's sliding window on the top layers")
  end
  r:get("sliding_window") -- read only with use_sliding_window
  r:get("max_window_layers")
  return cfg
end


-- Export (lrc export --hf): this model as a transformers checkpoint. The
-- tensors are IR over the parameters that build made (lrc.get_param), so
-- per-layer gains fold in as lrc computes them: LNS's 1/sqrt(l + 1) and
-- LayerRoPE's read gains become the norm weights, its write gains scale
-- the rows of o_proj and down_proj (h + F(x) * g = h + (diag(g) W) y).
local function hf_gain(cfg, site, l)
  local P, p = lrc.get_param, "model.layerrope." .. site
  return lrc.depth_gain(P(p .. "_gamma"), P(p .. "_alpha"), P(p .. "_beta"), P(p .. "_alpha_rot"),
    P(p .. "_beta_rot"), { layer = l, base = cfg.layerrope_base })
end

local function hf_llama_config(cfg, dh)
  local kv = cfg.n_kv_heads > 0 and cfg.n_kv_heads or cfg.n_heads
  local c = {
    architectures = { "LlamaForCausalLM" }, model_type = "llama", torch_dtype = "float32",
    hidden_size = cfg.d_model, intermediate_size = cfg.d_ff, num_hidden_layers = cfg.n_layers,
    num_attention_heads = cfg.n_heads, num_key_value_heads = kv, vocab_size = cfg.vocab,
    rms_norm_eps = cfg.eps, rope_theta = cfg.rope_base, tie_word_embeddings = cfg.tie_embeddings,
    attention_bias = cfg.qkv_bias, mlp_bias = cfg.mlp_bias, hidden_act = "silu",
    max_position_embeddings = 2048,
  }
  if cfg.rope_factor ~= 1 then
    c.rope_scaling = { rope_type = "linear", factor = cfg.rope_factor }
    if cfg.rope_orig_ctx > 0 then
      c.rope_scaling.rope_type = "llama3"
      c.rope_scaling.low_freq_factor, c.rope_scaling.high_freq_factor = cfg.rope_low_freq, cfg.rope_high_freq
      c.rope_scaling.original_max_position_embeddings = math.tointeger(cfg.rope_orig_ctx)
      if not c.rope_scaling.original_max_position_embeddings then
        error(string.format("rope_orig_ctx = %s: a llama checkpoint's original_max_position_embeddings is an integer",
          tostring(cfg.rope_orig_ctx)), 0)
      end
    end
  end
  if cfg.sliding_window > 0 then
    if c.rope_scaling then
      error("sliding_window with rope_factor: mistral, the family with windows, has no RoPE scaling", 0)
    end
    c.architectures, c.model_type = { "MistralForCausalLM" }, "mistral"
    c.sliding_window, c.head_dim, c.attention_bias, c.mlp_bias = cfg.sliding_window, dh, nil, nil
  end
  return c
end

-- Peri-Norm (peri, layerrope_peri) is Gemma 2's layer: h + N(F(N(h) w_in)) w_out.
-- Gemma 2 multiplies by (1 + w), scales the embeddings by sqrt(d) and
-- soft-caps and windows its attention; the export undoes the first two in
-- the weights (w - 1, the embeddings over sqrt(d) and lm_head apart) and
-- turns the others off (no caps; a window longer than any sequence).
local function hf_gemma2(cfg)
  local P, d = lrc.get_param, cfg.d_model
  if cfg.qkv_bias or cfg.o_bias or cfg.mlp_bias or cfg.plain_layernorm or cfg.fused_proj or cfg.sliding_window > 0 or
    cfg.rope_factor ~= 1 or cfg.n_experts > 0 then
    error("Peri-Norm exports as gemma2, which has no biases, fused projections, plain LayerNorm, sliding window, " ..
      "RoPE scaling or mixture of experts here")
  end
  local dh = cfg.head_dim > 0 and cfg.head_dim or d // cfg.n_heads
  local one = lrc.param("lrc.const.one", {}, { "const", value = 1.0 })
  local t = {}
  local E = P("model.embed_tokens.weight")
  t["model.embed_tokens.weight"] = E * (1 / math.sqrt(d))
  t["lm_head.weight"] = cfg.tie_embeddings and E or P("lm_head.weight")
  t["model.norm.weight"] = P("model.norm.weight") - one
  -- lrc's names (llama's layout) for each of gemma2's four norms
  local names = {
    input_layernorm = { "input_layernorm", "in_attn" },
    post_attention_layernorm = { "post_block_norm_attn", "out_attn" },
    pre_feedforward_layernorm = { "post_attention_layernorm", "in_mlp" },
    post_feedforward_layernorm = { "post_block_norm_mlp", "out_mlp" },
  }
  for l = 0, cfg.n_layers - 1 do
    local p = "model.layers." .. l .. "."
    for _, m in ipairs({ "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
      "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj" }) do
      t[p .. m .. ".weight"] = P(p .. m .. ".weight")
    end
    for hf_name, lrc_name in pairs(names) do
      local w = cfg.norm == "peri" and P(p .. lrc_name[1] .. ".weight") or hf_gain(cfg, lrc_name[2], l)
      t[p .. hf_name .. ".weight"] = w - one
    end
  end
  local c = {
    architectures = { "Gemma2ForCausalLM" }, model_type = "gemma2", torch_dtype = "float32",
    hidden_size = d, intermediate_size = cfg.d_ff, num_hidden_layers = cfg.n_layers,
    num_attention_heads = cfg.n_heads, num_key_value_heads = cfg.n_kv_heads > 0 and cfg.n_kv_heads or cfg.n_heads,
    head_dim = dh, vocab_size = cfg.vocab, rms_norm_eps = cfg.eps, rope_theta = cfg.rope_base,
    tie_word_embeddings = false, attention_bias = false, hidden_activation = "silu", hidden_act = "silu",
    query_pre_attn_scalar = dh, attn_logit_softcapping = lrc.null, final_logit_softcapping = lrc.null,
    sliding_window = 1 << 20, max_position_embeddings = 2048, cache_implementation = "hybrid",
  }
  return c, t
end

function M.to_hf(cfg)
  local P, d = lrc.get_param, cfg.d_model
  local norm = cfg.norm
  if norm == "post" or norm == "deepnet" then
    error(string.format("norm = %s normalizes after the residual add, which no Hugging Face family computes", norm))
  end
  if norm == "peri" or norm == "layerrope_peri" then return hf_gemma2(cfg) end
  if cfg.plain_layernorm or cfg.fused_proj then
    error("lrc exports the llama layout only (not plain_layernorm or fused_proj)")
  end
  if cfg.qkv_bias ~= cfg.o_bias then
    error("llama's attention_bias puts biases on q, k, v and o alike; qkv_bias without o_bias has no llama form")
  end
  if cfg.sliding_window > 0 and (cfg.qkv_bias or cfg.mlp_bias) then
    error("mistral (sliding_window) has no biases")
  end
  local moe = cfg.n_experts > 0
  if moe and (cfg.qkv_bias or cfg.sliding_window > 0 or cfg.rope_factor ~= 1) then
    error("a mixture of experts exports as mixtral, which has no biases, RoPE scaling or (in transformers' eager " ..
      "attention) sliding window")
  end
  local dh = cfg.head_dim > 0 and cfg.head_dim or d // cfg.n_heads
  if cfg.sliding_window == 0 and dh * cfg.n_heads ~= d then
    error(string.format("head_dim %d with %d heads is not d_model %d: transformers 4.44's llama ignores head_dim",
      dh, cfg.n_heads, d))
  end
  local t = {}
  local function copy(name) t[name] = P(name) end
  local function rows(name, g) -- diag(g) W, or g * b for a bias
    local w = P(name)
    t[name] = w.ndim == 2 and w * lrc.reshape(g, { d, 1 }) or w * g
  end
  copy("model.embed_tokens.weight")
  copy("model.norm.weight")
  if not cfg.tie_embeddings then copy("lm_head.weight") end
  -- the matrices of a layer, and the ones each write gain scales the rows of
  local mats = { "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj" }
  local down = { "mlp.down_proj" }
  if moe then
    mats[#mats + 1], down = "block_sparse_moe.gate", {}
    for e = 0, cfg.n_experts - 1 do
      local x = "block_sparse_moe.experts." .. e .. "."
      mats[#mats + 1], mats[#mats + 2], mats[#mats + 3] = x .. "w1", x .. "w2", x .. "w3"
      down[#down + 1] = x .. "w2"
    end
  else
    mats[#mats + 1], mats[#mats + 2], mats[#mats + 3] = "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"
  end
  local sites = { input_layernorm = { "in_attn", { "self_attn.o_proj" }, "out_attn" },
    post_attention_layernorm = { "in_mlp", down, "out_mlp" } }
  for l = 0, cfg.n_layers - 1 do
    local p = "model.layers." .. l .. "."
    for _, m in ipairs(mats) do
      copy(p .. m .. ".weight")
      if (m:match("^self_attn") and cfg.qkv_bias) or (m:match("^mlp") and cfg.mlp_bias) then copy(p .. m .. ".bias") end
    end
    for nname, s in pairs(sites) do
      local w = p .. nname .. ".weight"
      if norm == "pre" then
        copy(w)
      elseif norm == "lns" then
        t[w] = P(w) * (1 / math.sqrt(l + 1))
      else -- layerrope
        t[w] = hf_gain(cfg, s[1], l)
        local g = hf_gain(cfg, s[3], l)
        for _, m in ipairs(s[2]) do
          rows(p .. m .. ".weight", g)
          local b = p .. m .. ".bias"
          if t[b] then rows(b, g) end
        end
      end
    end
  end
  local c = hf_llama_config(cfg, dh)
  if moe then
    c.architectures, c.model_type, c.attention_bias, c.mlp_bias = { "MixtralForCausalLM" }, "mixtral", nil, nil
    c.num_local_experts, c.num_experts_per_tok = cfg.n_experts, cfg.experts_per_tok
    c.output_router_logits, c.router_aux_loss_coef, c.router_jitter_noise, c.sliding_window = false, 0.001, 0.0, lrc.null
  end
  return c, t
end

return M
