-- Vision Transformer (docs/models.md): patch embedding, class token, learned
-- positions, pre-LayerNorm blocks with bidirectional attention and a GELU
-- MLP, a classifier on the class token. norm = pre | layerrope. Parameter
-- names follow Hugging Face's ViTForImageClassification.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "Vision Transformer for image classification; norm = pre | layerrope"
-- The input is `images` f32 [B, channels, image_size, image_size]; the
-- loss is cross-entropy of the class logits against `labels` [B].
M.task = "image-classification"

M.defaults = {
  image_size = 28, channels = 1, patch = 4, n_classes = 10,
  d_model = 64, n_layers = 6, n_heads = 2, d_ff = 256,
  norm = "pre", eps = 1e-6,
  -- LayerRoPE: ViTs initialise the magnitude slope beta at 0 (docs/models.md)
  layerrope_alpha = 0.0, layerrope_beta = 0.0,
  layerrope_alpha_rot = 0.0, layerrope_beta_rot = -0.5,
  layerrope_base = 100.0,
}

M.presets = {
  -- ImageNet sizes of docs/models.md (16x16 patches of 224x224 RGB images)
  ["vit-t"] = { image_size = 224, channels = 3, patch = 16, n_classes = 1000, d_model = 192, n_layers = 12, n_heads = 3, d_ff = 768 },
  ["vit-s"] = { image_size = 224, channels = 3, patch = 16, n_classes = 1000, d_model = 384, n_layers = 12, n_heads = 6, d_ff = 1536 },
  -- Fashion-MNIST (28x28 grey, 10 classes): 49 patches of 4x4
  small = { image_size = 28, channels = 1, patch = 4, n_classes = 10, d_model = 64, n_layers = 6, n_heads = 2, d_ff = 256 },
  -- for tests
  tiny = { image_size = 8, channels = 1, patch = 4, n_classes = 10, d_model = 16, n_layers = 2, n_heads = 2, d_ff = 32 },
}

local placements = { pre = true, layerrope = true }

local function validate(cfg)
  for _, k in ipairs({ "image_size", "channels", "patch", "n_classes", "d_model", "n_layers", "n_heads", "d_ff" }) do
    nn.positive_int(cfg[k], k)
  end
  if not placements[cfg.norm] then
    lrc.fail("norm must be pre or layerrope for vit; got '%s'", cfg.norm)
  end
  if cfg.image_size % cfg.patch ~= 0 then
    lrc.fail("image_size (%d) is not divisible by patch (%d): patches must tile the image", cfg.image_size, cfg.patch)
  end
  if cfg.d_model % cfg.n_heads ~= 0 then
    lrc.fail("n_heads (%d) must divide d_model (%d)", cfg.n_heads, cfg.d_model)
  end
  if cfg.norm == "layerrope" and cfg.d_model % 2 ~= 0 then
    lrc.fail("LayerRoPE pairs features (2j, 2j+1), so d_model must be even, got %d", cfg.d_model)
  end
  if not (cfg.eps > 0) then lrc.fail("eps must be positive, got %s", tostring(cfg.eps)) end
end

local zeros = "zeros"
local function bias(name, n) return lrc.param(name .. ".bias", { n }, zeros, "bias") end

-- y = x W^T + b, Hugging Face's dense layer
local function dense(name, d_in, d_out)
  local lin = nn.linear(name, d_in, d_out)
  local b = bias(name, d_out)
  return function(x) return lin(x) + b end
end

function M.build(cfg, images)
  validate(cfg)
  local d, L, H, p = cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.patch
  local s = images.shape
  local B, C, S = s[1], cfg.channels, cfg.image_size
  if s[2] ~= C or s[3] ~= S or s[4] ~= S then
    lrc.fail("images must be [B, %d, %d, %d], got [%s]", C, S, S, table.concat(s, ", "))
  end
  local g = S // p        -- patches per side
  local N = g * g         -- patches
  local T = N + 1         -- with the class token
  local dh = d // H

  -- Patch embedding: a stride-p convolution is a matmul over flattened
  -- (channel, row, column) patches, weight [d, C, p, p] as Hugging Face keeps it.
  local conv_w = lrc.param("vit.embeddings.patch_embeddings.projection.weight", { d, C, p, p },
    { "normal", std = 0.02 }, "embedding")
  local conv_b = bias("vit.embeddings.patch_embeddings.projection", d)
  local patches = lrc.reshape(lrc.transpose(lrc.reshape(images, { B, C, g, p, g, p }), { 0, 2, 4, 1, 3, 5 }),
    { B, N, C * p * p })
  local e = lrc.matmul(patches, lrc.reshape(conv_w, { d, C * p * p })) + conv_b
  -- [cls; patches] + positions: the patches shifted down one row, the class
  -- token in row 0 of a zero [1, T, d] table, the sum broadcast over the batch
  local cls = lrc.param("vit.embeddings.cls_token", { 1, 1, d }, { "normal", std = 0.02 }, "embedding")
  local pos = lrc.param("vit.embeddings.position_embeddings", { 1, T, d }, { "normal", std = 0.02 }, "embedding")
  local h = lrc.slice(e, { axis = 1, start = -1, size = T }) + (lrc.slice(cls, { axis = 1, start = 0, size = T }) + pos)

  local rope = nil
  if cfg.norm == "layerrope" then
    rope = nn.layerrope_sites("vit.layerrope", d, cfg)
  end

  -- LayerNorm with its own bias; the gain learned per layer (pre) or made
  -- by LayerRoPE for layer l (layerrope)
  -- (lrc.tap names the multipliers for lrc diagnose: no effect on the graph)
  local tap_name = { in_attn = "read.attn.", in_mlp = "read.mlp.", out_attn = "write.attn.", out_mlp = "write.mlp." }
  local function norm(x, prefix, site, l)
    local y = lrc.layernorm(x, { eps = cfg.eps })
    if rope then
      y = y * lrc.tap(tap_name[site] .. l, rope[site]:gain(l))
    else
      y = y * lrc.tap(tap_name[site] .. l, lrc.param(prefix .. ".weight", { d }, "ones", "norm"))
    end
    return y + lrc.param(prefix .. ".bias", { d }, zeros, "norm")
  end
  local function write(x, site, l) return rope and x * lrc.tap(tap_name[site] .. l, rope[site]:gain(l)) or x end

  for l = 0, L - 1 do
    local pre = "vit.encoder.layer." .. l
    local att = pre .. ".attention.attention"
    local q, k, v = dense(att .. ".query", d, d), dense(att .. ".key", d, d), dense(att .. ".value", d, d)
    local o = dense(pre .. ".attention.output.dense", d, d)
    local up, down = dense(pre .. ".intermediate.dense", d, cfg.d_ff), dense(pre .. ".output.dense", cfg.d_ff, d)
    local x = norm(h, pre .. ".layernorm_before", "in_attn", l)
    local function heads(t) return lrc.reshape(t, { B, T, H, dh }) end
    local y = lrc.attention(heads(q(x)), heads(k(x)), heads(v(x)), { causal = false, scale = 1 / math.sqrt(dh) })
    h = h + write(o(lrc.reshape(y, { B, T, d })), "out_attn", l)
    x = norm(h, pre .. ".layernorm_after", "in_mlp", l)
    h = lrc.tap("residual." .. l, h + write(down(lrc.gelu(up(x))), "out_mlp", l)) -- the stream after layer l
  end

  -- the final LayerNorm (an ordinary affine one) on the class token, then the classifier
  local c = lrc.reshape(lrc.slice(h, { axis = 1, start = 0, size = 1 }), { B, d })
  c = lrc.layernorm(c, { eps = cfg.eps }) * lrc.param("vit.layernorm.weight", { d }, "ones", "norm")
    + lrc.param("vit.layernorm.bias", { d }, zeros, "norm")
  local logits = dense("classifier", d, cfg.n_classes)(c)
  return logits
end

return M
