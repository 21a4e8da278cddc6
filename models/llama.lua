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
  if cfg.d_model % cfg.n_heads ~= 0 then
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
  local function N(x) return lrc.rmsnorm(x, { eps = cfg.eps }) end

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

  -- One residual half-step h -> h' around block F (attention or MLP).
  local function half_step(h, F, kind, l, prefix)
    if norm == "pre" then
      return h + F(N(h) * gain(prefix, read_name[kind]))
    elseif norm == "lns" then
      return h + F(N(h) * gain(prefix, read_name[kind]) * (1 / math.sqrt(l + 1)))
    elseif norm == "post" then
      return N(h + F(h)) * gain(prefix, post_name[kind])
    elseif norm == "deepnet" then
      return N(h * alpha + F(h)) * gain(prefix, post_name[kind])
    elseif norm == "peri" then
      local w_in = gain(prefix, read_name[kind])
      return h + N(F(N(h) * w_in)) * gain(prefix, peri_name[kind])
    elseif norm == "layerrope" then
      return h + F(N(h) * rope["in_" .. kind]:gain(l)) * rope["out_" .. kind]:gain(l)
    else -- layerrope_peri
      return h + N(F(N(h) * rope["in_" .. kind]:gain(l))) * rope["out_" .. kind]:gain(l)
    end
  end

  local h = embed(tokens)
  for l = 0, L - 1 do
    local prefix = "model.layers." .. l
    local attn = nn.attention(prefix .. ".self_attn", d, cfg.n_heads,
      { rope_base = cfg.rope_base, init_qk = init_qk, init_vo = init_small })
    local mlp = nn.swiglu(prefix .. ".mlp", d, cfg.d_ff, { init_in = init_small, init_out = init_small })
    h = half_step(h, attn, "attn", l, prefix)
    h = half_step(h, mlp, "mlp", l, prefix)
  end
  local final = nn.rmsnorm("model.norm", d, cfg.eps)
  local lm_head = nn.linear("lm_head", d, cfg.vocab, { group = "head" })
  local logits = lm_head(final(h)) -- not a tail call: keeps this line in error locations
  return logits
end

return M
