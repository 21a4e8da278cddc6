-- nn_scan.lua — the delta rule on nn.scan (ctest nn_scan_torch): a state
-- S [B, dk, dk] per sequence, S_t = S_{t-1} + beta_t (v_t - S_{t-1} k_t) k_t^T
-- and y_t = S_t q_t, a recurrence that is not associative (no lrc.scan form),
-- from projections of the tokens' embeddings; tests/reference/nn_scan_ref.py
-- is the same in PyTorch, a python loop over t.
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 8, vocab = 32, dk = 4 }, presets = {} }
function M.build(cfg, tokens)
  local d, dk, B = cfg.d_model, cfg.dk, tokens.shape[1]
  local w = { init = { "normal", std = 0.5 } }
  local x = nn.embedding("embed", cfg.vocab, d)(tokens)
  local xs = lrc.concat({ nn.linear("q", d, dk, w)(x), nn.linear("k", d, dk, w)(x), nn.linear("v", d, dk, w)(x),
                          lrc.sigmoid(nn.linear("beta", d, 1, w)(x)) }, { axis = -1 })
  local S0 = lrc.full({ B, dk, dk }, 0)
  local S, ys = nn.scan(function(S, xt)
    local part = function(i, n) return lrc.slice(xt, { axis = 1, start = i, size = n }) end
    local q, k, v, beta = part(0, dk), part(dk, dk), part(2 * dk, dk), part(3 * dk, 1)
    local delta = lrc.reshape(v, { B, dk, 1 }) - S:bmm(lrc.reshape(k, { B, dk, 1 }))
    local S2 = S + lrc.bmm(delta * lrc.reshape(beta, { B, 1, 1 }), lrc.reshape(k, { B, 1, dk }))
    return S2, lrc.reshape(S2:bmm(lrc.reshape(q, { B, dk, 1 })), { B, dk })
  end, S0, xs)
  return nn.linear("head", dk, cfg.vocab, { init = { "normal", std = 0.3 } })(ys)
end
return M
