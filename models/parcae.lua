-- Parcae, a looped (recurrent-depth) language model (docs/models.md): a
-- prelude, a recurrent block run T times on a latent state through a loop
-- region of the IR, and a coda. norm = pre | layerrope.
--
-- Run-time inputs besides the tokens: "iterations" i32 [B], the loop's
-- count per sequence (the config's T unless given), and with
-- state_init = like-init "h0" f32 [B, T, d], the initial state (lrc draws
-- it from TruncNormal(0, sqrt(2 / 5d)) for every run). A training graph
-- unrolls the last mu_bwd iterations, the ones that take gradients; the
-- loop before them runs without: "iterations" then counts those, and
-- "iteration_mask" f32 [2, mu_bwd, B, 1, 1] says which unrolled iterations
-- each sequence runs ([0]: 1, [1]: 0) or skips ([0]: 0, [1]: 1), as Parcae
-- masks finished sequences: h = G(h) run + h keep is exact either way.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "Parcae looped decoder (prelude, recurrent block x T, coda); norm = pre | layerrope"

M.defaults = {
  d_model = 768, n_heads = 6, n_prelude = 2, n_recurrent = 2, n_coda = 2, vocab = 32000,
  T = 8, mu_rec = 8.0, mu_bwd = 4, state_init = "like-init",
  norm = "pre", eps = 1e-6, rope_base = 10000.0,
  -- LayerRoPE: looped models initialise the magnitude slope beta at 0; base 100
  layerrope_alpha = 0.0, layerrope_beta = 0.0,
  layerrope_alpha_rot = 0.0, layerrope_beta_rot = -0.5,
  layerrope_base = 100.0,
}

M.presets = {
  ["140m"] = { d_model = 768, n_heads = 6, n_prelude = 2, n_recurrent = 2, n_coda = 2 },
  ["370m"] = { d_model = 1024, n_heads = 8, n_prelude = 4, n_recurrent = 4, n_coda = 4 },
  ["770m"] = { d_model = 1280, n_heads = 10, n_prelude = 6, n_recurrent = 6, n_coda = 6 },
  -- byte-level models for tests and for training on this machine
  tiny = { d_model = 32, n_heads = 2, n_prelude = 1, n_recurrent = 1, n_coda = 1, vocab = 256 },
  small = { d_model = 128, n_heads = 4, n_prelude = 1, n_recurrent = 2, n_coda = 1, vocab = 256 },
}

local function validate(cfg)
  for _, k in ipairs({ "d_model", "n_heads", "n_recurrent", "vocab", "mu_bwd" }) do
    nn.positive_int(cfg[k], k)
  end
  for _, k in ipairs({ "n_prelude", "n_coda" }) do
    if math.type(cfg[k]) ~= "integer" or cfg[k] < 0 then
      lrc.fail("%s must be an integer >= 0, got %s", k, tostring(cfg[k]))
    end
  end
  if math.type(cfg.T) ~= "integer" or cfg.T <= 0 then
    lrc.fail("T must be a positive integer (the recurrent block's iterations), got %s", tostring(cfg.T))
  end
  if not (cfg.mu_rec > 0) then lrc.fail("mu_rec must be positive, got %s", tostring(cfg.mu_rec)) end
  if cfg.norm ~= "pre" and cfg.norm ~= "layerrope" then
    lrc.fail("norm must be pre or layerrope for parcae; got '%s'", cfg.norm)
  end
  if cfg.state_init ~= "like-init" and cfg.state_init ~= "zero" then
    lrc.fail("state_init must be like-init or zero; got '%s'", cfg.state_init)
  end
  if cfg.d_model % cfg.n_heads ~= 0 then
    lrc.fail("n_heads (%d) must divide d_model (%d)", cfg.n_heads, cfg.d_model)
  end
  if (cfg.d_model // cfg.n_heads) % 2 ~= 0 then
    lrc.fail("RoPE rotates pairs, so the head dimension d_model/n_heads = %d must be even", cfg.d_model // cfg.n_heads)
  end
  if not (cfg.eps > 0) then lrc.fail("eps must be positive, got %s", tostring(cfg.eps)) end
end

function M.build(cfg, tokens, ctx)
  validate(cfg)
  local training = ctx and ctx.training
  local d, H = cfg.d_model, cfg.n_heads
  local dh = d // H
  local s = tokens.shape
  local B, T = s[1], s[2]
  local init = { "normal", std = math.sqrt(2 / (5 * d)) } -- small init, as the initial state
  local function N(x) return lrc.rmsnorm(x, { eps = cfg.eps }) end

  local rope = nil
  if cfg.norm == "layerrope" then
    rope = nn.layerrope_sites("model.layerrope", d, cfg)
  end

  -- A pre-norm block: causal attention with RoPE and a weightless RMSNorm
  -- on each head of q and k, then down(relu(up(x))^2); output projections
  -- start at zero. l is the block's depth in the network (LayerRoPE).
  local function block(prefix, l)
    local lin = function(name, din, dout, zero)
      return nn.linear(prefix .. "." .. name, din, dout, { init = zero and "zeros" or init })
    end
    local q, k, v = lin("self_attn.q_proj", d, d), lin("self_attn.k_proj", d, d), lin("self_attn.v_proj", d, d)
    local o = lin("self_attn.o_proj", d, d, true)
    local up, down = lin("mlp.up_proj", d, 4 * d), lin("mlp.down_proj", 4 * d, d, true)
    local w_attn, w_mlp
    if not rope then
      w_attn = lrc.param(prefix .. ".input_layernorm.weight", { d }, "ones", "norm")
      w_mlp = lrc.param(prefix .. ".post_attention_layernorm.weight", { d }, "ones", "norm")
    end
    local function gain(site) return rope[site]:gain(l) end
    return function(h)
      local x = N(h) * (rope and gain("in_attn") or w_attn)
      local function heads(t) return lrc.reshape(t, { B, T, H, dh }) end
      local qh = N(lrc.rope(heads(q(x)), { base = cfg.rope_base }))
      local kh = N(lrc.rope(heads(k(x)), { base = cfg.rope_base }))
      local a = lrc.attention(qh, kh, heads(v(x)), { causal = true, scale = 1 / math.sqrt(dh) })
      a = o(lrc.reshape(a, { B, T, d }))
      h = h + (rope and a * gain("out_attn") or a)
      x = N(h) * (rope and gain("in_mlp") or w_mlp)
      local r = lrc.relu(up(x))
      local m = down(r * r)
      return h + (rope and m * gain("out_mlp") or m)
    end
  end

  local embed = nn.embedding("model.embed_tokens", cfg.vocab, d, { init = init })
  local h = embed(tokens)
  local depth = 0
  for i = 0, cfg.n_prelude - 1 do
    h = block("model.prelude." .. i, depth)(h)
    depth = depth + 1
  end
  local e = N(h) * lrc.param("model.prelude_norm.weight", { d }, "ones", "norm")

  -- the diagonal injection: u = A_bar h + Delta (B e), A_bar = exp(-Delta A) in (0, 1)^d
  local A_log = lrc.param("model.injection.A_log", { d }, "zeros", "injection")
  local dt_bias = lrc.param("model.injection.dt_bias", { d },
    { "const", value = math.log(math.exp(-math.log(math.sqrt(1 / 5))) - 1) }, "injection") -- A_bar = sqrt(1/5)
  local Bm = lrc.param("model.injection.B.weight", { d, d }, "identity", "injection")
  local delta = lrc.softplus(dt_bias)
  local a_bar = lrc.exp(lrc.exp(A_log) * delta * -1.0)
  local drive = lrc.matmul(e, Bm) * delta -- the same every iteration: computed once
  local core = {}
  for i = 0, cfg.n_recurrent - 1 do core[i] = block("model.recurrent." .. i, depth + i) end
  local function step(state)
    local u = state * a_bar + drive
    for i = 0, cfg.n_recurrent - 1 do u = core[i](u) end
    return u
  end

  local h0
  if cfg.state_init == "zero" then
    h0 = e * 0.0
  else
    h0 = lrc.input("h0", { B, T, d })
  end
  local counts = lrc.input("iterations", { B }, "i32")
  h = nn.loop(h0, counts, step)
  if training then
    -- the last mu_bwd iterations again, unrolled so that they keep what the
    -- backward needs; sequence b runs those its mask enables
    local mask = lrc.input("iteration_mask", { 2, cfg.mu_bwd, B, 1, 1 })
    local function at(half, j)
      local m = lrc.slice(lrc.slice(mask, { axis = 0, start = half, size = 1 }), { axis = 1, start = j, size = 1 })
      return lrc.reshape(m, { B, 1, 1 })
    end
    for j = 0, cfg.mu_bwd - 1 do
      h = step(h) * at(0, j) + h * at(1, j)
    end
  end
  depth = depth + cfg.n_recurrent

  h = nn.linear("model.C", d, d, { init = init })(h)
  for i = 0, cfg.n_coda - 1 do
    h = block("model.coda." .. i, depth)(h)
    depth = depth + 1
  end
  h = N(h) * lrc.param("model.norm.weight", { d }, "ones", "norm")
  local logits = lrc.matmul(h, embed.weight) -- tied: the embedding is the output head
  return logits
end

return M
