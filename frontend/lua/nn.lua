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

-- y = x W^T (+ b), W [d_out, d_in]; init N(0, 0.02) unless opt.init says
-- otherwise. opt.bias adds a bias NAME.bias [d_out] (zeros at init).
function nn.linear(name, d_in, d_out, opt)
  opt = opt or {}
  positive_int(d_in, name .. " input size")
  positive_int(d_out, name .. " output size")
  local w = lrc.param(name .. ".weight", { d_out, d_in }, opt.init or { "normal", std = 0.02 },
    opt.group or "linear")
  local b = opt.bias and lrc.param(name .. ".bias", { d_out }, "zeros", opt.group or "linear") or nil
  return module({ weight = w, bias = b }, function(self, x)
    local y = lrc.matmul(x, self.weight)
    if self.bias then y = y + self.bias end
    return y
  end)
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
-- opt: n_kv_heads (grouped key-value heads, default n_heads), head_dim
-- (default d / n_heads), bias (q, k and v), o_bias, window (sliding-window
-- attention, 0 = none), softcap (attention logit soft-capping, 0 = none),
-- scale (default 1 / sqrt(head_dim)), fused (one qkv_proj), rope_base,
-- rope_scaling (lrc.rope's factor, low_freq, high_freq, orig_ctx: linear or
-- Llama 3 scaling, docs/lua-api.md), init_qk, init_vo, group.
function nn.attention(prefix, d, n_heads, opt)
  opt = opt or {}
  positive_int(n_heads, "n_heads")
  local kv = opt.n_kv_heads or n_heads
  positive_int(kv, "n_kv_heads")
  if n_heads % kv ~= 0 then
    lrc.fail("n_kv_heads (%d) must divide n_heads (%d): each key-value head serves a group of query heads", kv, n_heads)
  end
  if not opt.head_dim and d % n_heads ~= 0 then
    lrc.fail("n_heads (%d) must divide d_model (%d)", n_heads, d)
  end
  local dh = opt.head_dim or d // n_heads
  positive_int(dh, "head_dim")
  if dh % 2 ~= 0 then
    lrc.fail("RoPE rotates pairs, so the head dimension must be even, got %d", dh)
  end
  local group = opt.group or "attention"
  local function lin(name, d_in, d_out, init, bias)
    return nn.linear(prefix .. "." .. name, d_in, d_out, { init = init, group = group, bias = bias })
  end
  local m = {
    n_heads = n_heads, n_kv_heads = kv, head_dim = dh, rope_base = opt.rope_base or 10000.0,
    attrs = { causal = true, scale = opt.scale or 1 / math.sqrt(dh) },
  }
  m.rope = { base = m.rope_base }
  for key, value in pairs(opt.rope_scaling or {}) do m.rope[key] = value end
  if opt.fused then -- one qkv_proj whose rows are q's, then k's, then v's (Phi-3)
    m.qkv = lin("qkv_proj", d, (n_heads + 2 * kv) * dh, opt.init_qk, opt.bias)
  else
    m.q = lin("q_proj", d, n_heads * dh, opt.init_qk, opt.bias)
    m.k = lin("k_proj", d, kv * dh, opt.init_qk, opt.bias)
    m.v = lin("v_proj", d, kv * dh, opt.init_vo, opt.bias)
  end
  m.o = lin("o_proj", n_heads * dh, d, opt.init_vo, opt.o_bias)
  -- q, k and v of x [B, T, d]: [B, T, heads * head_dim] each
  function m:project(x)
    if not self.qkv then return self.q(x), self.k(x), self.v(x) end
    local y = self.qkv(x)
    local qw, kw = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
    local function part(start, size) return lrc.slice(y, { axis = y.ndim - 1, start = start, size = size }) end
    return part(0, qw), part(qw, kw), part(qw + kw, kw)
  end
  if opt.window and opt.window > 0 then m.attrs.window = opt.window end
  if opt.softcap and opt.softcap > 0 then m.attrs.softcap = opt.softcap end
  return module(m, function(self, x)
    local s = x.shape
    local B, T = s[1], s[2]
    local function heads(t, h) return lrc.reshape(t, { B, T, h, self.head_dim }) end
    local q, k, v = self:project(x)
    q = lrc.rope(heads(q, self.n_heads), self.rope)
    k = lrc.rope(heads(k, self.n_kv_heads), self.rope)
    local y = lrc.attention(q, k, heads(v, self.n_kv_heads), self.attrs)
    return self.o(lrc.reshape(y, { B, T, self.n_heads * self.head_dim }))
  end)
end

-- SwiGLU MLP: down(silu(gate(x)) * up(x)). opt: init_in (gate, up), init_out (down),
-- bias (on all three), act (a function of the gate, default lrc.silu),
-- fused (one gate_up_proj), group.
function nn.swiglu(prefix, d, d_ff, opt)
  opt = opt or {}
  local group = opt.group or "mlp"
  local function lin(name, d_in, d_out, init)
    return nn.linear(prefix .. "." .. name, d_in, d_out, { init = init, group = group, bias = opt.bias })
  end
  local m = { act = opt.act or lrc.silu }
  if opt.fused then -- one gate_up_proj: the gate's rows, then up's (Phi-3)
    m.gate_up = lin("gate_up_proj", d, 2 * d_ff, opt.init_in)
  else
    m.gate = lin("gate_proj", d, d_ff, opt.init_in)
    m.up = lin("up_proj", d, d_ff, opt.init_in)
  end
  m.down = lin("down_proj", d_ff, d, opt.init_out)
  return module(m, function(self, x)
    if not self.gate_up then return self.down(self.act(self.gate(x)) * self.up(x)) end
    local y = self.gate_up(x)
    local function half(i) return lrc.slice(y, { axis = y.ndim - 1, start = i * d_ff, size = d_ff }) end
    return self.down(self.act(half(0)) * half(1))
  end)
end

-- A sparse mixture of experts (Mixtral's block_sparse_moe): a router
-- (PREFIX.gate) scores n_experts per row, lrc.topk keeps the k best (in
-- torch.topk's order, ties included), a softmax over their scores weighs
-- them, and each expert, a SwiGLU w2(act(w1 x) * w3 x), computes only the
-- rows routed to it (lrc.expert_matmul): a row costs k experts, not all.
-- opt: act, init_in, init_out, group.
function nn.moe(prefix, d, d_ff, n_experts, k, opt)
  opt = opt or {}
  positive_int(n_experts, "n_experts")
  positive_int(k, "experts per token")
  if k > n_experts then lrc.fail("experts per token (%d) exceeds n_experts (%d)", k, n_experts) end
  local group = opt.group or "mlp"
  local init_in, init_out = opt.init_in or { "normal", std = 0.02 }, opt.init_out or { "normal", std = 0.02 }
  local m = { gate = nn.linear(prefix .. ".gate", d, n_experts, { group = "router" }), experts = {}, k = k,
    act = opt.act or lrc.silu }
  for e = 0, n_experts - 1 do
    local p = prefix .. ".experts." .. e
    m.experts[e + 1] = {
      w1 = lrc.param(p .. ".w1.weight", { d_ff, d }, init_in, group),
      w2 = lrc.param(p .. ".w2.weight", { d, d_ff }, init_out, group),
      w3 = lrc.param(p .. ".w3.weight", { d_ff, d }, init_in, group),
    }
  end
  return module(m, function(self, x)
    local logits = self.gate(x)                         -- [..., E]
    local ids = lrc.topk(logits, { k = self.k })        -- [..., k]
    local weight = lrc.softmax(lrc.gather(logits, ids)) -- [..., k]: the top k renormalized
    local rows = x.shape
    table.insert(rows, #rows, 1)                        -- [..., 1, d]: one row for every slot
    local xs, y = lrc.reshape(x, rows), nil
    for e, ex in ipairs(self.experts) do
      local at = { expert = e - 1, experts = #self.experts }
      local h = self.act(lrc.expert_matmul(xs, ex.w1, ids, at)) * lrc.expert_matmul(xs, ex.w3, ids, at)
      local ye = lrc.expert_matmul(h, ex.w2, ids, at)  -- [..., k, d], zero in the slots of other experts
      y = y and y + ye or ye
    end
    -- each slot's row times its weight, summed over the slots
    local out, ws = nil, x.shape
    ws[#ws] = 1
    ws[#ws + 1] = 1                                     -- [..., 1, 1]
    for s = 0, self.k - 1 do
      local ys = lrc.slice(y, { axis = y.ndim - 2, start = s, size = 1 })
      local term = ys * lrc.reshape(lrc.slice(weight, { axis = weight.ndim - 1, start = s, size = 1 }), ws)
      out = out and out + term or term
    end
    return lrc.reshape(out, x.shape)
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

local function numel(shape, from)
  local n = 1
  for i = from or 1, #shape do n = n * shape[i] end
  return n
end

local function shape_str(shape) return "[" .. table.concat(shape, ",") .. "]" end

-- "model.lua:42" of nn.scan's caller; where it was a tail call (`return
-- nn.scan(...)`, which leaves no frame of the caller), the line that defines
-- the body
local function scan_site(body)
  for level = 3, 64 do
    local i = debug.getinfo(level, "Sl")
    if not i then break end
    if i.source:sub(1, 1) == "@" and i.currentline > 0 then return i.short_src .. ":" .. i.currentline end
  end
  local i = debug.getinfo(body, "S")
  return i.source:sub(1, 1) == "@" and (i.short_src .. ":" .. i.linedefined) or "?"
end

-- tensors joined along axis 1, at most 64 in each lrc.concat (its limit),
-- in blocks of blocks for longer lists
local function concat_steps(parts)
  if #parts <= 64 then return lrc.concat(parts, { axis = 1 }) end
  local out = {}
  for i = 1, #parts, 64 do
    out[#out + 1] = lrc.concat(table.move(parts, i, math.min(i + 63, #parts), 1, {}), { axis = 1 })
  end
  return concat_steps(out)
end

-- ys of T steps stacked along a new axis 1 (lrc.stack joins up to 64)
local function stack_steps(ys)
  if #ys <= 64 then return lrc.stack(ys, { axis = 1 }) end
  local blocks = {}
  for i = 1, #ys, 64 do
    blocks[#blocks + 1] = lrc.stack(table.move(ys, i, math.min(i + 63, #ys), 1, {}), { axis = 1 })
  end
  return concat_steps(blocks)
end

-- nn.scan in a training graph: body applied to each step's slice of xs in
-- turn, every carry a node of its own, which autodiff differentiates as any
-- other chain (the graph grows with T here)
local function unroll_scan(step, init, xs, xstep)
  local carry, ys = init, {}
  for t = 0, xs.shape[2] - 1 do
    local y
    carry, y = step(carry, lrc.reshape(lrc.slice(xs, { axis = 1, start = t, size = 1 }), xstep))
    ys[#ys + 1] = y
  end
  return carry, stack_steps(ys)
end

-- nn.scan(body, init, xs): JAX's lax.scan along the sequence. xs [B, T, ...],
-- init (the carry) [B, ...]; for t = 0 .. T-1, carry, y_t = body(carry, xs[:, t]),
-- with y_t [B, ...]; returns the last carry and ys [B, T, ...] (the y_t in order).
-- The body is traced once (and once more, apart, to learn y_t's shape): a loop
-- region (nn.loop) of T iterations whose state packs the carry, the ys so far
-- and the xs still to come, each step shifting the last two by one step, so the
-- graph's size does not grow with T (the bytes each step moves do). A training
-- graph (lrc.training()) unrolls the T steps instead, so that the gradient
-- backpropagates through time from each step's saved carry (unroll_scan).
function nn.scan(body, init, xs)
  local site = scan_site(body)
  local fail = function(fmt, ...) error(site .. ": " .. string.format(fmt, ...), 0) end
  local B, T = xs.shape[1], xs.shape[2]
  if xs.ndim < 2 or init.shape[1] ~= B then
    fail("nn.scan: xs %s must be [B, T, ...] and init %s [B, ...]", shape_str(xs.shape), shape_str(init.shape))
  end
  local xstep = { B }
  for i = 3, xs.ndim do xstep[#xstep + 1] = xs.shape[i] end
  local nh, nx = numel(init.shape, 2), numel(xstep, 2)
  local function step(carry, x)
    local nxt, y = body(carry, x)
    if not nxt or not y then fail("nn.scan: the body must return the next carry and a per-step output") end
    local same = nxt.ndim == init.ndim
    for i = 1, init.ndim do same = same and nxt.shape[i] == init.shape[i] end
    if not same then
      fail("nn.scan: the body returned a carry of shape %s for one of %s", shape_str(nxt.shape), shape_str(init.shape))
    end
    if y.ndim < 1 or y.shape[1] ~= B then fail("nn.scan: the body's per-step output %s must be [B, ...], B = %d", shape_str(y.shape), B) end
    return nxt, y
  end
  if lrc.training() then return unroll_scan(step, init, xs, xstep) end
  local yshape = lrc.trace_apart(function()
    local _, y = step(init, lrc.reshape(lrc.slice(xs, { axis = 1, start = 0, size = 1 }), xstep))
    return y.shape
  end)
  local ny = numel(yshape, 2)
  -- the state [B, nh + T ny + T nx]: carry, ys so far (the newest last), xs to come (the next first)
  local flat = function(v, n) return lrc.reshape(v, { B, n }) end
  local part = function(v, start, size) return lrc.slice(v, { axis = 1, start = start, size = size }) end
  local state = lrc.loop_state(lrc.concat({ flat(init, nh), lrc.full({ B, T * ny }, 0), flat(xs, T * nx) }, { axis = 1 }))
  local carry = lrc.reshape(part(state, 0, nh), init.shape)
  local nxt, y = step(carry, lrc.reshape(part(state, nh + T * ny, nx), xstep))
  local ys = flat(y, ny)
  if T > 1 then ys = lrc.concat({ part(state, nh + ny, (T - 1) * ny), ys }, { axis = 1 }) end
  -- the xs shifted one step: the slice runs past the state's end, which pads zeros
  local rest = T > 1 and part(state, nh + T * ny + nx, T * nx) or lrc.full({ B, nx }, 0)
  local counts = lrc.cast(lrc.full({ B }, T), "i32")
  local final = lrc.loop_next(state, lrc.concat({ flat(nxt, nh), ys, rest }, { axis = 1 }), counts, { scan = 1 })
  local out = { B, T }
  for i = 2, #yshape do out[#out + 1] = yshape[i] end
  return lrc.reshape(part(final, 0, nh), init.shape), lrc.reshape(part(final, nh, T * ny), out)
end

return nn
