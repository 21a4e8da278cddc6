-- lrc.nn — the building blocks of model descriptions.
--
-- Each constructor makes its parameters (with Hugging Face names, [out, in]
-- layout for linear maps) and returns a module: a table holding them that is
-- called like a function on tensors. Tensor memory stays in C; these only
-- build IR. Errors point at the line of the model file that called in.
local lrc = require "lrc"

local nn = {}

local function module(fields, forward)
  return setmetatable(fields, { __call = forward })
end

local function positive_int(v, what)
  if math.type(v) ~= "integer" or v <= 0 then
    lrc.fail("%s must be a positive integer, got %s", what, tostring(v))
  end
end

nn.positive_int = positive_int

-- y = x W^T, W [d_out, d_in]; init N(0, 0.02) unless opt.init says otherwise.
function nn.linear(name, d_in, d_out, opt)
  opt = opt or {}
  positive_int(d_in, name .. " input size")
  positive_int(d_out, name .. " output size")
  local w = lrc.param(name .. ".weight", { d_out, d_in }, opt.init or { "normal", std = 0.02 },
    opt.group or "linear")
  return module({ weight = w }, function(self, x) return lrc.matmul(x, self.weight) end)
end

function nn.embedding(name, vocab, d, opt)
  opt = opt or {}
  positive_int(vocab, "vocab")
  positive_int(d, "embedding width")
  local w = lrc.param(name .. ".weight", { vocab, d }, opt.init or { "normal", std = 0.02 },
    opt.group or "embedding")
  return module({ weight = w }, function(self, ids) return lrc.embedding(ids, self.weight) end)
end

-- RMSNorm x / sqrt(mean(x^2) + eps), times a learned gain when named.
function nn.rmsnorm(name, d, eps, opt)
  opt = opt or {}
  local w = name and lrc.param(name .. ".weight", { d }, "ones", opt.group or "norm") or nil
  return module({ weight = w, eps = eps }, function(self, x)
    local y = lrc.rmsnorm(x, { eps = self.eps })
    if self.weight then y = y * self.weight end
    return y
  end)
end

-- Causal multi-head self-attention with sequence RoPE on q and k.
-- opt: rope_base, init_qk, init_vo (init rules), group.
function nn.attention(prefix, d, n_heads, opt)
  opt = opt or {}
  positive_int(n_heads, "n_heads")
  if d % n_heads ~= 0 then
    lrc.fail("n_heads (%d) must divide d_model (%d)", n_heads, d)
  end
  local dh = d // n_heads
  if dh % 2 ~= 0 then
    lrc.fail("RoPE rotates pairs, so the head dimension d_model/n_heads = %d must be even", dh)
  end
  local group = opt.group or "attention"
  local m = {
    q = nn.linear(prefix .. ".q_proj", d, d, { init = opt.init_qk, group = group }),
    k = nn.linear(prefix .. ".k_proj", d, d, { init = opt.init_qk, group = group }),
    v = nn.linear(prefix .. ".v_proj", d, d, { init = opt.init_vo, group = group }),
    o = nn.linear(prefix .. ".o_proj", d, d, { init = opt.init_vo, group = group }),
    n_heads = n_heads, head_dim = dh, rope_base = opt.rope_base or 10000.0,
  }
  return module(m, function(self, x)
    local s = x.shape
    local B, T = s[1], s[2]
    local function heads(t) return lrc.reshape(t, { B, T, self.n_heads, self.head_dim }) end
    local q = lrc.rope(heads(self.q(x)), { base = self.rope_base })
    local k = lrc.rope(heads(self.k(x)), { base = self.rope_base })
    local y = lrc.attention(q, k, heads(self.v(x)), { causal = true, scale = 1 / math.sqrt(self.head_dim) })
    return self.o(lrc.reshape(y, { B, T, d }))
  end)
end

-- SwiGLU MLP: down(silu(gate(x)) * up(x)). opt: init_in (gate, up), init_out (down), group.
function nn.swiglu(prefix, d, d_ff, opt)
  opt = opt or {}
  local group = opt.group or "mlp"
  local m = {
    gate = nn.linear(prefix .. ".gate_proj", d, d_ff, { init = opt.init_in, group = group }),
    up = nn.linear(prefix .. ".up_proj", d, d_ff, { init = opt.init_in, group = group }),
    down = nn.linear(prefix .. ".down_proj", d_ff, d, { init = opt.init_out, group = group }),
  }
  return module(m, function(self, x)
    return self.down(lrc.silu(self.gate(x)) * self.up(x))
  end)
end

-- One LayerRoPE site: a shared gain gamma [d] and four scalars. m:gain(l)
-- is the site's gain for 0-based layer l (the depth_gain op).
-- opt: alpha, beta, alpha_rot, beta_rot (initial values), base, group.
function nn.layerrope(prefix, site, d, opt)
  opt = opt or {}
  if d % 2 ~= 0 then
    lrc.fail("LayerRoPE pairs features (2j, 2j+1), so the width must be even, got %d", d)
  end
  local group = opt.group or "layerrope"
  local function scalar(name, value)
    return lrc.param(prefix .. "." .. site .. "_" .. name, {}, { "const", value = value }, group)
  end
  local m = {
    gamma = lrc.param(prefix .. "." .. site .. "_gamma", { d }, "ones", group),
    alpha = scalar("alpha", opt.alpha or 0.0),
    beta = scalar("beta", opt.beta or -0.5),
    alpha_rot = scalar("alpha_rot", opt.alpha_rot or 0.0),
    beta_rot = scalar("beta_rot", opt.beta_rot or -0.5),
    base = opt.base or 100.0,
  }
  function m:gain(l)
    return lrc.depth_gain(self.gamma, self.alpha, self.beta, self.alpha_rot, self.beta_rot,
      { layer = l, base = self.base })
  end
  return m
end

-- The four LayerRoPE sites (reads in_attn, in_mlp; writes out_attn,
-- out_mlp) under prefix, initialised from a model config's layerrope_* keys.
function nn.layerrope_sites(prefix, d, cfg)
  local sites = {}
  for _, site in ipairs({ "in_attn", "in_mlp", "out_attn", "out_mlp" }) do
    sites[site] = nn.layerrope(prefix, site, d, {
      alpha = cfg.layerrope_alpha, beta = cfg.layerrope_beta,
      alpha_rot = cfg.layerrope_alpha_rot, beta_rot = cfg.layerrope_beta_rot,
      base = cfg.layerrope_base,
    })
  end
  return sites
end

-- A loop region (docs/architecture.md, rule 5): h = body(h) for counts[b] iterations of
-- row b (counts: i32 [B]; the body runs max(counts) times, finished rows
-- keep their state). The body is traced once: its kernels are compiled once
-- and launched per iteration. No gradient flows through the loop.
function nn.loop(init, counts, body)
  local state = lrc.loop_state(init)
  local nxt = body(state)
  return lrc.loop_next(state, nxt, counts)
end

return nn
