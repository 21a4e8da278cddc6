-- Mamba (S6), with Hugging Face's MambaForCausalLM names: pre-RMSNorm
-- residual blocks around a mixer whose in_proj halves are the input u and
-- the gate z; a causal depthwise convolution written as a sum of shifted
-- slices of u behind d_conv - 1 zero rows (lrc.concat, lrc.slice); the
-- selective scan h_t = exp(A dt_t) h_{t-1} + dt_t B_t u_t as one lrc.scan
-- over a [B, T, d_inner, d_state] state, read out by lrc.sum over the state
-- against C_t; the head tied to the embeddings.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "Mamba selective state space model: depthwise conv by shifted slices, lrc.scan"

M.defaults = {
  d_model = 256, n_layers = 2, vocab = 256, d_inner = 512, d_state = 16, d_conv = 4, dt_rank = 16,
  eps = 1e-5,
}

-- y[t] = bias + sum_j w[c, 0, j] u[t - K + 1 + j], zeros before the start: the
-- input behind K - 1 zero rows, then K slices of length T, each weighted by
-- one tap of every channel
local function causal_conv(p, u, C, K)
  local B, T = u.shape[1], u.shape[2]
  local w = lrc.param(p .. ".weight", { C, 1, K }, { "normal", std = 0.3 }, "conv")
  local bias = lrc.param(p .. ".bias", { C }, "zeros", "conv")
  local padded = u
  if K > 1 then padded = lrc.concat({ lrc.full({ B, K - 1, C }, 0), u }, { axis = 1 }) end
  local y = bias
  for j = 0, K - 1 do
    local tap = lrc.reshape(lrc.slice(w, { axis = 2, start = j, size = 1 }), { C })
    y = y + lrc.slice(padded, { axis = 1, start = j, size = T }) * tap
  end
  return y
end

local function mixer(p, cfg, x)
  local B, T = x.shape[1], x.shape[2]
  local C, N, R = cfg.d_inner, cfg.d_state, cfg.dt_rank
  local uz = nn.linear(p .. ".in_proj", cfg.d_model, 2 * C)(x)
  local u = lrc.slice(uz, { axis = 2, start = 0, size = C })
  local z = lrc.slice(uz, { axis = 2, start = C, size = C })
  u = lrc.silu(causal_conv(p .. ".conv1d", u, C, cfg.d_conv))
  -- the selection: a step size per channel, and B_t, C_t per position
  local sel = nn.linear(p .. ".x_proj", C, R + 2 * N)(u)
  local dt = lrc.slice(sel, { axis = 2, start = 0, size = R })
  local Bt = lrc.reshape(lrc.slice(sel, { axis = 2, start = R, size = N }), { B, T, 1, N })
  local Ct = lrc.reshape(lrc.slice(sel, { axis = 2, start = R + N, size = N }), { B, T, 1, N })
  -- softplus(-4) = 0.018: a step in Mamba's initial range [0.001, 0.1]
  local dt_proj = nn.linear(p .. ".dt_proj", R, C, { init = { "normal", std = R ^ -0.5 } })
  local dt_bias = lrc.param(p .. ".dt_proj.bias", { C }, { "const", value = -4 }, "linear")
  dt = lrc.softplus(dt_proj(dt) + dt_bias)
  -- A = -1 at init for every state (Mamba's -1..-N has no init rule here)
  local A = -lrc.exp(lrc.param(p .. ".A_log", { C, N }, "zeros", "ssm"))
  local dt4 = lrc.reshape(dt, { B, T, C, 1 })
  local a = lrc.exp(dt4 * A)
  local b = lrc.reshape(dt * u, { B, T, C, 1 }) * Bt
  local h = lrc.scan(a, b, { axis = 1 })
  local D = lrc.param(p .. ".D", { C }, "ones", "ssm")
  local y = lrc.sum(h * Ct, { axis = -1 }) + u * D
  return nn.linear(p .. ".out_proj", C, cfg.d_model)(y * lrc.silu(z))
end

function M.build(cfg, tokens)
  for _, k in ipairs({ "d_model", "n_layers", "vocab", "d_inner", "d_state", "d_conv", "dt_rank" }) do
    nn.positive_int(cfg[k], k)
  end
  local embed = nn.embedding("backbone.embeddings", cfg.vocab, cfg.d_model)
  local h = embed(tokens)
  for l = 0, cfg.n_layers - 1 do
    local p = "backbone.layers." .. l
    h = h + mixer(p .. ".mixer", cfg, nn.rmsnorm(p .. ".norm", cfg.d_model, cfg.eps)(h))
  end
  h = nn.rmsnorm("backbone.norm_f", cfg.d_model, cfg.eps)(h)
  return lrc.matmul(h, embed.weight) -- lm_head is the embedding matrix
end

return M
