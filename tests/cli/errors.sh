#!/usr/bin/env bash
# errors.sh — end-to-end bad-input tests of the lrc command.
#
#   tests/cli/errors.sh PATH_TO_LRC
#   LRC_TESTS_VERBOSE=1 also lists the passing cases, =2 with their stderr line.
#
# The rule: bad user input never crashes, hangs or leaves a partial output
# file. lrc ends with exactly one line on stderr, starting with "lrc", that
# names the place (file.lua:LINE:, the tensor, the byte offset, the option)
# and what was expected; exit status 1, or 2 for usage errors.
#
# Each case runs under `timeout 20` in a scratch directory and checks the exit
# status, that stderr is one non-empty line starting with "lrc" and matching
# the case's patterns (extended regular expressions), that nothing is printed
# on stdout (no traceback either), and that no file is left behind or changed
# (no -o output, no temporary file, an existing -o file byte-identical).
# Prints one line per failing case, then "N passed, M failed"; exits 0 only
# when nothing failed.
set -u
export LC_ALL=C # stable sort order for the snapshots, and English strerror texts

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH_TO_LRC" >&2
  exit 2
fi
LRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=$ROOT/models/llama.lua
FIX=$ROOT/tests/fixtures/llama/pre_base
PY=${PYTHON:-python3}
VERBOSE=${LRC_TESTS_VERBOSE:-0}

# shellcheck source=error_harness.sh
. "$ROOT/tests/cli/error_harness.sh"

# ---- helpers that write files ------------------------------------------------

st() { "$PY" "$ROOT/tests/tools/st.py" "$@" || { echo "errors.sh: st.py $* failed" >&2; exit 2; }; }

model() { cat >"$1"; } # model FILE <<'EOF' ... EOF

# ---- fixtures ------------------------------------------------------------------

W=w.safetensors
IN=in.safetensors
cp "$FIX/weights.safetensors" "$W"
cp "$FIX/input.safetensors" "$IN"
SETS=()
while IFS= read -r line; do [ -n "$line" ] && SETS+=(--set "$line"); done <"$FIX/config.txt"
FWD=(forward "$MODEL" "${SETS[@]}")
TINY=(init "$MODEL" --preset tiny)
LOC='llama\.lua:[0-9]+: '

model good.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = { defaults = { d_model = 8, vocab = 16 }, presets = { tiny = { d_model = 4 } } }

function M.build(cfg, tokens)
  local embed = nn.embedding("embed", cfg.vocab, cfg.d_model)
  local head = nn.linear("head", cfg.d_model, cfg.vocab)
  return head(lrc.rmsnorm(embed(tokens), { eps = 1e-5 }))
end

return M
EOF

# the controls: the same commands with good input succeed
ok "control: forward on pre_base" "${FWD[@]}" --weights "$W" --input "$IN" -o ctl.safetensors
ok "control: init tiny" "${TINY[@]}" -o keep.safetensors
ok "control: user model" init good.lua --preset tiny -o ctl2.safetensors
rm -f ctl.safetensors ctl2.safetensors

# ---- Lua model files -------------------------------------------------------------

model syntax.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8 }, presets = {} }
function M.build(cfg, tokens)
  local x = = tokens
  return x
end
return M
EOF
t "Lua syntax error" 1 'syntax\.lua:4: ' "near '='" -- init syntax.lua -o out.safetensors

model callnil.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 8, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local embed = nn.embedding("embed", cfg.vocab, cfg.d_model)
  local h = nn.silu(embed(tokens))
  return h
end
return M
EOF
t "Lua run-time error in build (calling nil)" 1 'callnil\.lua:6: ' 'nil' -- init callnil.lua -o out.safetensors

model toperr.lua <<'EOF'
local lrc = require "lrc"
local width = nil
local M = { defaults = { d_model = width * 2 }, presets = {} }
return M
EOF
t "Lua run-time error while loading the file" 1 'toperr\.lua:3: ' 'arithmetic' -- init toperr.lua -o out.safetensors

model retnum.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8 }, presets = {} }
function M.build(cfg, tokens) return tokens end
return 42
EOF
t "model file returns a number" 1 'retnum\.lua' 'table' 'number' -- init retnum.lua -o out.safetensors

model nobuild.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8 }, presets = {} }
function M.bulid(cfg, tokens) return tokens end
return M
EOF
t "model without a build function" 1 'nobuild\.lua' 'build' -- init nobuild.lua -o out.safetensors

model nodefaults.lua <<'EOF'
local M = { presets = {} }
function M.build(cfg, tokens) return tokens end
return M
EOF
t "model without defaults" 1 'nodefaults\.lua' 'defaults' -- init nodefaults.lua -o out.safetensors

model tabledefault.lua <<'EOF'
local M = { defaults = { d_model = 8, sizes = { 1, 2 } }, presets = {} }
function M.build(cfg, tokens) return tokens end
return M
EOF
t "a default that is a table" 1 'tabledefault\.lua' 'defaults' -- init tabledefault.lua -o out.safetensors

model badpreset.lua <<'EOF'
local M = { defaults = { d_model = 8 }, presets = { tiny = { d_modle = 4 } } }
function M.build(cfg, tokens) return tokens end
return M
EOF
t "a preset setting an unknown key" 1 'badpreset\.lua' "'tiny'" "'d_modle'" -- init badpreset.lua --preset tiny -o out.safetensors

model retnum2.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8 }, presets = {} }
function M.build(cfg, tokens)
  return cfg.d_model
end
return M
EOF
t "build returns a number" 1 'retnum2\.lua' 'tensor' 'number' -- init retnum2.lua -o out.safetensors

model loop.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8 }, presets = {} }
function M.build(cfg, tokens)
  while true do end
end
return M
EOF
t "endless loop in build" 1 'loop\.lua:4: ' 'loop' -- init loop.lua -o out.safetensors

model layerloop.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 8, vocab = 16, n_layers = 2 }, presets = {} }
function M.build(cfg, tokens)
  local h = nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens)
  local l = 0
  while l < cfg.n_layers do -- forgot l = l + 1: every turn adds graph nodes
    h = h + lrc.silu(h)
  end
  return nn.linear("head", cfg.d_model, cfg.vocab)(h)
end
return M
EOF
t "endless loop that adds layers (stopped by the node limit)" 1 'layerloop\.lua:[0-9]+: ' -- init layerloop.lua -o out.safetensors

model toploop.lua <<'EOF'
local n = 0
while true do n = n + 1 end
EOF
t "endless loop while loading the file" 1 'toploop\.lua:2: ' 'loop' -- inspect toploop.lua

model recurse.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8 }, presets = {} }
local function layer(x, l)
  local y = layer(x, l + 1)
  return y
end
function M.build(cfg, tokens)
  return layer(tokens, 0)
end
return M
EOF
t "endless recursion" 1 'recurse\.lua:4: ' 'stack overflow' -- init recurse.lua -o out.safetensors

model matmul.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 8, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local x = nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens)
  local w = lrc.param("head.weight", { cfg.vocab, cfg.d_model + 1 }, { "normal", std = 0.02 })
  return lrc.matmul(x, w)
end
return M
EOF
t "shape error: matmul of mismatched sizes" 1 'matmul\.lua:7: ' 'matmul' -- init matmul.lua -o out.safetensors

model attr.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 8, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local x = nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens)
  local y = lrc.rmsnorm(x, { epsilon = 1e-5 })
  return nn.linear("head", cfg.d_model, cfg.vocab)(y)
end
return M
EOF
t "unknown attribute to an op" 1 'attr\.lua:6: ' 'rmsnorm' "'epsilon'" -- init attr.lua -o out.safetensors

# attention's attrs by name: window and softcap are known, a misspelt one is not; k and v
# with 4 heads for q's 6 do not group (GQA needs Hkv dividing H)
model gqa_attr.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 48, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local x = nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens)
  local q = lrc.reshape(x, { -1, 1, 6, 8 })
  local kv = lrc.reshape(nn.linear("kv", cfg.d_model, 16)(x), { -1, 1, 2, 8 })
  local y = lrc.attention(q, kv, kv, { causal = true, scale = 0.35, window = 4, softcap = 50, sliding = 4 })
  return nn.linear("head", cfg.d_model, cfg.vocab)(lrc.reshape(y, { -1, 1, 48 }))
end
return M
EOF
t "unknown attribute to attention" 1 'gqa_attr\.lua:8: ' 'attention' "unknown attribute 'sliding'" -- init gqa_attr.lua -o out.safetensors
model gqa_heads.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 48, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local x = nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens)
  local q = lrc.reshape(x, { -1, 1, 6, 8 })
  local kv = lrc.reshape(nn.linear("kv", cfg.d_model, 32)(x), { -1, 1, 4, 8 })
  local y = lrc.attention(q, kv, kv, { causal = true, scale = 0.35, window = 4, softcap = 50 })
  return nn.linear("head", cfg.d_model, cfg.vocab)(lrc.reshape(y, { -1, 1, 48 }))
end
return M
EOF
t "GQA: key-value heads that do not divide the query heads" 1 'gqa_heads\.lua:8: ' "k and v have 4 heads, which do not divide q's 6 heads" -- init gqa_heads.lua -o out.safetensors

# attention's general form: a bias that does not broadcast to [B, H, Tq, Tk], a bias that is
# not a tensor, k and v of other lengths, q and k of other widths
model attn_bias.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 48, vocab = 16, case = "bias" }, presets = {} }
function M.build(cfg, tokens)
  local x = nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens)
  local q = lrc.reshape(x, { -1, 1, 6, 8 })
  local kv = lrc.reshape(nn.linear("kv", cfg.d_model, 16)(x), { -1, 1, 2, 8 })
  local k, v, opt = kv, kv, { causal = true }
  if cfg.case == "bias" then opt.bias = lrc.input("bias", { 1, 1, 1, 2 }, "f32", { default = 0 }) end
  if cfg.case == "number" then opt.bias = 3 end
  if cfg.case == "tk" then v = lrc.reshape(kv, { -1, 2, 2, 4 }) end
  if cfg.case == "dqk" then k = lrc.reshape(nn.linear("k", cfg.d_model, 12)(x), { -1, 1, 2, 6 }) end
  if cfg.case == "learned" then opt.bias = lrc.param("alibi", { 1, 6, 1, 1 }, "zeros") end
  local y = lrc.attention(q, k, v, opt)
  return lrc.reshape(nn.linear("head", cfg.d_model, cfg.vocab)(lrc.reshape(y, { -1, 1, 48 })), { tokens.shape[1], tokens.shape[2], cfg.vocab })
end
return M
EOF
t "attention: a bias that does not broadcast" 1 'attn_bias\.lua:14: ' 'bias \[1,1,1,2\] does not broadcast to \[B, H, Tq, Tk\]' -- init attn_bias.lua -o out.safetensors
t "attention: a bias that is not a tensor" 1 'attn_bias\.lua:14: ' 'attention: bias must be a tensor, got number' -- init attn_bias.lua --set case=number -o out.safetensors
t "attention: k and v of other lengths" 1 'attn_bias\.lua:14: ' 'must agree in B, Tk and Hkv' -- init attn_bias.lua --set case=tk -o out.safetensors
t "attention: q and k of other widths" 1 'attn_bias\.lua:14: ' 'must agree in B and Dqk' -- init attn_bias.lua --set case=dqk -o out.safetensors
# the general form's gradient (here a learned bias's) runs on cpu too (its values: test_cpu_kernels)
"$LRC" init attn_bias.lua --set case=learned -o attn_w.st >/dev/null
st make attn_in.st '{"tokens": ["I32", [2, 3], [1, 2, 3, 4, 5, 6]], "labels": ["I32", [2, 3], [6, 5, 4, 3, 2, 1]]}'
ok "attention: the general form's gradient on cpu" backward attn_bias.lua --set case=learned --weights attn_w.st --input attn_in.st -o g.st --target cpu

model twice.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 8, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local x = nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens)
  local g1 = lrc.param("norm.weight", { cfg.d_model }, "ones")
  local g2 = lrc.param("norm.weight", { cfg.d_model }, "ones")
  return nn.linear("head", cfg.d_model, cfg.vocab)(x * g1 * g2)
end
return M
EOF
t "the same parameter defined twice" 1 'twice\.lua:7: ' "'norm\.weight'" -- init twice.lua -o out.safetensors

model badinit.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local w = lrc.param("embed.weight", { cfg.vocab, cfg.d_model }, { "gaussian", std = 0.02 })
  return lrc.embedding(tokens, w)
end
return M
EOF
t "unknown init rule" 1 'badinit\.lua:4: ' "'embed\.weight'" 'init' -- init badinit.lua -o out.safetensors

model negsize.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local w = lrc.param("embed.weight", { cfg.vocab, -cfg.d_model }, "zeros")
  return lrc.embedding(tokens, w)
end
return M
EOF
t "negative size in a parameter shape" 1 'negsize\.lua:4: ' "embed\.weight" -- init negsize.lua -o out.safetensors

model addstr.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 8, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local x = nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens)
  return nn.linear("head", cfg.d_model, cfg.vocab)(x + "one")
end
return M
EOF
t "tensor plus a string" 1 'addstr\.lua:6: ' '\+ needs tensors or a number, got string' -- init addstr.lua -o out.safetensors

model requires.lua <<'EOF'
local lrc = require "lrc"
local tf = require "lrc.transformers"
local M = { defaults = { d_model = 8 }, presets = {} }
function M.build(cfg, tokens) return tokens end
return M
EOF
t "require of a missing module" 1 'requires\.lua:2: ' "lrc\.transformers" -- init requires.lua -o out.safetensors

model i8input.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8 }, presets = {} }
function M.build(cfg, tokens)
  local x = lrc.input("x", { 2 }, "i8")
  return x
end
return M
EOF
t "an input of dtype i8 (q8 files' storage, not a graph dtype)" 1 'i8input\.lua:4: ' "input 'x': unknown dtype 'i8'" -- init i8input.lua -o out.safetensors

model outside.lua <<'EOF'
local lrc = require "lrc"
local shared = lrc.param("shared.weight", { 8, 8 }, "ones")
local M = { defaults = { d_model = 8 }, presets = {} }
function M.build(cfg, tokens) return tokens end
return M
EOF
t "a tensor made outside build" 1 'outside\.lua:2: ' 'build' -- init outside.lua -o out.safetensors

model errtable.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8 }, presets = {} }
function M.build(cfg, tokens)
  error({ reason = "not ready" })
end
return M
EOF
t "error() with a table value" 1 'errtable\.lua:4: ' -- init errtable.lua -o out.safetensors

model multiline.lua <<'EOF'
local lrc = require "lrc"
local M = { defaults = { d_model = 8 }, presets = {} }
function M.build(cfg, tokens)
  error("d_model must be\neven")
end
return M
EOF
t "an error message with a newline" 1 'multiline\.lua:4: ' 'must be.even' -- init multiline.lua -o out.safetensors

# the ops along one axis: an axis that does not exist, a concat of shapes
# that differ off its axis (naming the axis and both sizes), an expand to a
# shape that x does not broadcast to, a scan of a and b of two shapes
# or with an init of the wrong shape, a bmm whose K or batch axes differ,
# a cast to another dtype, a division of i32 tensors, an nn.scan whose body
# changes the carry's shape
along_model() { # along_model FILE EXPRESSION: a model whose line 6 returns EXPRESSION of x [1, 1, 8]
  model "$1" <<EOF
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 8, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local x = nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens)
  return $2
end
return M
EOF
}
along_model sumaxis.lua 'lrc.sum(x, { axis = 3 })'
t "a reduction over an axis that does not exist" 1 'sumaxis\.lua:6: ' 'sum: axis 3 is not an axis of \[1,1,8\] \(-3 to 2\)' -- init sumaxis.lua -o out.safetensors
along_model amaxaxis.lua 'lrc.amax(x, { axis = -4, keepdim = true })'
t "amax over an axis that does not exist" 1 'amaxaxis\.lua:6: ' 'amax: axis -4 is not an axis' -- init amaxaxis.lua -o out.safetensors
along_model smaxis.lua 'lrc.softmax(x, { axis = 3 })'
t "softmax over an axis that does not exist" 1 'smaxis\.lua:6: ' 'softmax: axis 3 is not an axis of \[1,1,8\]' -- init smaxis.lua -o out.safetensors
along_model catshape.lua 'lrc.concat({ x, lrc.reshape(x, { 1, 2, 4 }) }, { axis = 1 })'
t "concat of mismatched shapes" 1 'catshape\.lua:6: ' 'concat: input 2 \[1,2,4\] has size 4 at axis 2, input 1 \[1,1,8\] has 8' -- init catshape.lua -o out.safetensors
along_model expshape.lua 'lrc.expand(x, { 3, 1, 5 })'
t "expand to a shape x does not broadcast to" 1 'expshape\.lua:6: ' 'expand: x \[1,1,8\] cannot expand to \[3,1,5\]: axis 2 has size 8' -- init expshape.lua -o out.safetensors
along_model scanshape.lua 'lrc.scan(x, lrc.reshape(x, { 1, 2, 4 }))'
t "scan of a and b of other shapes" 1 'scanshape\.lua:6: ' 'scan: a \[1,1,8\] and b \[1,2,4\] must have one shape' -- init scanshape.lua -o out.safetensors
along_model scaninit.lua 'x:scan(x, { init = x })'
t "scan with an init of a's shape" 1 'scaninit\.lua:6: ' 'scan: init \[1,1,8\] must be a \[1,1,8\] without axis 1, \[1,8\]' -- init scaninit.lua -o out.safetensors
along_model castto.lua 'lrc.cast(x, "f16")'
t "cast to a dtype other than f32 and i32" 1 'castto\.lua:6: ' 'cast: the dtype must be "f32" or "i32", got f16' -- init castto.lua -o out.safetensors
along_model divi32.lua 'x + lrc.cast(lrc.arange(8) / lrc.arange(8), "f32")'
t "a division of i32 tensors" 1 'divi32\.lua:6: ' 'div: input 1 must be a floating-point tensor, got i32' -- init divi32.lua -o out.safetensors
along_model scancarry.lua 'nn.scan(function(h, xt) return lrc.reshape(h, { 1, 2, 4 }), xt end, lrc.reshape(x, { 1, 8 }), x)'
t "nn.scan whose body changes the carry's shape" 1 'scancarry\.lua:6: ' 'nn\.scan: the body returned a carry of shape \[1,2,4\] for one of \[1,8\]' -- init scancarry.lua -o out.safetensors
along_model bmmk.lua 'x:bmm(x)'
t "bmm whose K differs from b's rows" 1 'bmmk\.lua:6: ' 'bmm: a \[1,1,8\] has K = 8 but b \[1,1,8\] has 1 rows' -- init bmmk.lua -o out.safetensors
along_model bmmbatch.lua 'lrc.bmm(lrc.expand(x, { 2, 3, 8 }), lrc.expand(lrc.transpose(x, { 0, 2, 1 }), { 3, 8, 1 }))'
t "bmm of batch axes that do not broadcast" 1 'bmmbatch\.lua:6: ' 'bmm: the batch axes of a \[2,3,8\] and b \[3,8,1\] do not broadcast \(axis 0: 2 and 3\)' -- init bmmbatch.lua -o out.safetensors

t "model file that does not exist" 1 'nothere\.lua' 'llama' -- init nothere.lua -o out.safetensors
mkdir adir.lua
t "a directory as the model file" 1 'adir\.lua' '[Dd]irectory' -- init adir.lua -o out.safetensors
printf '\x1bLua\x54\x00\x19\x93\r\n\x1a\n' >bytecode.lua
t "precompiled bytecode as the model" 1 'bytecode\.lua' -- init bytecode.lua -o out.safetensors
t "unknown preset of a user model" 1 'good\.lua' "'huge'" 'tiny' -- init good.lua --preset huge -o out.safetensors

# ---- configuration ------------------------------------------------------------------

t "--set unknown key" 1 "'foo'" 'd_model' -- "${TINY[@]}" --set foo=1 -o out.safetensors
t "--set d_model=abc" 1 'd_model=abc' 'integer' -- "${TINY[@]}" --set d_model=abc -o out.safetensors
t "--set n_layers=2.5" 1 'n_layers=2\.5' 'integer' -- "${TINY[@]}" --set n_layers=2.5 -o out.safetensors
t "--set n_layers out of range" 1 'n_layers' 'integer' -- "${TINY[@]}" --set n_layers=99999999999999999999 -o out.safetensors
t "--set without =" 1 '--set d_model' 'KEY=VALUE' -- "${TINY[@]}" --set d_model -o out.safetensors
t "--set with an empty key" 1 '--set =4' 'KEY=VALUE' -- "${TINY[@]}" --set =4 -o out.safetensors
t "--set eps=nan" 1 'eps=nan' 'number' -- "${TINY[@]}" --set eps=nan -o out.safetensors
t "--set boolean key to maybe" 1 'deepnet_depth_alpha=maybe' 'true or false' -- "${TINY[@]}" --set deepnet_depth_alpha=maybe -o out.safetensors
t "unknown preset" 1 "'huge'" '60m' -- init "$MODEL" --preset huge -o out.safetensors
t "n_heads not dividing d_model" 1 "$LOC" 'n_heads \(5\)' 'd_model \(32\)' -- "${TINY[@]}" --set n_heads=5 -o out.safetensors
t "odd d_model with norm=layerrope" 1 "$LOC" 'LayerRoPE' 'even' '33' -- "${TINY[@]}" --set norm=layerrope --set d_model=33 --set n_heads=3 -o out.safetensors
t "odd head dimension (RoPE)" 1 "$LOC" 'head dimension' '17' -- "${TINY[@]}" --set d_model=34 -o out.safetensors
t "negative d_model" 1 "$LOC" 'd_model' '-4' -- "${TINY[@]}" --set d_model=-4 -o out.safetensors
t "vocab=0" 1 "$LOC" 'vocab' -- "${TINY[@]}" --set vocab=0 -o out.safetensors
t "n_layers=0" 1 "$LOC" 'n_layers' -- "${TINY[@]}" --set n_layers=0 -o out.safetensors
t "unknown norm" 1 "$LOC" 'norm' "'foo'" -- "${TINY[@]}" --set norm=foo -o out.safetensors
t "eps=0" 1 "$LOC" 'eps' -- "${TINY[@]}" --set eps=0 -o out.safetensors
t "negative rope_base" 1 "$LOC" 'rope_base' -- "${TINY[@]}" --set rope_base=-1 -o out.safetensors
t "built-in model name, bad config" 1 'models/llama\.lua:[0-9]+: ' 'n_heads' -- init llama --preset tiny --set n_heads=3 -o out.safetensors
t "parameter count overflows (inspect)" 1 'embed_tokens|vocab' 'overflow|too large|too big' -- inspect llama --preset tiny --set vocab=4611686018427387904 --params
t "parameter too large to allocate (init)" 1 'embed_tokens' -- "${TINY[@]}" --set vocab=4611686018427387904 -o out.safetensors
t "demo with a vocabulary too small for bytes" 1 'vocab' '256' -- demo --set vocab=100

# ---- weights ----------------------------------------------------------------------------

fwd_w() { # name pattern... -- WEIGHTS
  local name=$1
  shift
  local pats=()
  while [ "$1" != -- ]; do pats+=("$1"); shift; done
  t "$name" 1 "${pats[@]}" -- "${FWD[@]}" --weights "$2" --input "$IN" -o out.safetensors
}
fwd_in() { # name pattern... -- INPUT
  local name=$1
  shift
  local pats=()
  while [ "$1" != -- ]; do pats+=("$1"); shift; done
  t "$name" 1 "${pats[@]}" -- "${FWD[@]}" --weights "$W" --input "$2" -o out.safetensors
}

st drop "$W" w_missing.st model.layers.1.mlp.up_proj.weight
fwd_w "weights: a missing tensor" 'w_missing\.st' "'model\.layers\.1\.mlp\.up_proj\.weight'" 'missing' -- w_missing.st
st set "$W" w_extra.st model.layers.3.mlp.up_proj.weight F32 '[48, 32]'
fwd_w "weights: an extra tensor" 'w_extra\.st' "'model\.layers\.3\.mlp\.up_proj\.weight'" -- w_extra.st
st set "$W" w_shape.st model.layers.2.mlp.gate_proj.weight F32 '[32, 48]'
fwd_w "weights: a transposed tensor" 'w_shape\.st' "'model\.layers\.2\.mlp\.gate_proj\.weight'" '\[32, ?48\]' '\[48, ?32\]' -- w_shape.st
st set "$W" w_rank.st model.norm.weight F32 '[1, 32]'
fwd_w "weights: a tensor of the wrong rank" 'w_rank\.st' "'model\.norm\.weight'" -- w_rank.st
st set "$W" w_i32.st model.layers.0.self_attn.q_proj.weight I32 '[32, 32]'
fwd_w "weights: I32 where a float is expected" 'w_i32\.st' "'model\.layers\.0\.self_attn\.q_proj\.weight'" 'I32' -- w_i32.st
st make w_tokens.st '{"tokens": ["I32", [2, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]]}'
fwd_w "weights: the input file given as weights" 'w_tokens\.st' -- w_tokens.st

# ---- corrupt safetensors files, as weights and as input ----------------------------------

corrupt() { # KIND SRC OUT
  case $1 in
  cut_data) st cut "$2" "$3" data ;;
  cut_header) st cut "$2" "$3" header ;;
  hlen_past_end) st hlen "$2" "$3" "$(($(stat -c %s "$2") - 7))" ;;
  hlen_huge) st hlen "$2" "$3" 18446744073709551615 ;;
  bad_json) st raw "$2" "$3" '{"tokens": {"dtype": "I32", "shape": [2, 7], "data_offsets": [0, 56]' ;;
  offsets_outside) st hdr "$2" "$3" 'k = next(iter(h)); h[k]["data_offsets"][1] += 1000000' ;;
  overlap) st hdr "$2" "$3" 'k = next(iter(h)); b, e = h[k]["data_offsets"]; h["zz.overlap"] = {"dtype": "I32", "shape": [(e - b) // 8], "data_offsets": [b + (e - b) // 2, b + (e - b) // 2 + (e - b) // 8 * 4]}' ;;
  f64) st hdr "$2" "$3" 'k = next(iter(h)); h[k]["dtype"] = "F64"' ;;
  empty) : >"$3" ;;
  short) head -c 7 "$2" >"$3" ;;
  esac
}
declare -A WHAT=(
  [cut_data]="truncated in the middle of the data"
  [cut_header]="truncated in the middle of the header"
  [hlen_past_end]="header length past the end of the file"
  [hlen_huge]="header length 2^64-1"
  [bad_json]="invalid JSON"
  [offsets_outside]="data offsets outside the file"
  [overlap]="overlapping data offsets"
  [f64]="unknown dtype F64"
  [empty]="an empty file"
  [short]="a 7-byte file"
)
declare -A PAT=(
  [cut_data]="outside|offset [0-9]+"
  [cut_header]="header length [0-9]+ at offset 0"
  [hlen_past_end]="header length [0-9]+ at offset 0"
  [hlen_huge]="header length [0-9]+ at offset 0"
  [bad_json]="JSON.*offset [0-9]+"
  [offsets_outside]="outside"
  [overlap]="overlap.*offset [0-9]+"
  [f64]="'F64'"
  [empty]="0 bytes.*offset 0"
  [short]="7 bytes.*offset 0"
)
for kind in cut_data cut_header hlen_past_end hlen_huge bad_json offsets_outside overlap f64 empty short; do
  corrupt "$kind" "$W" "w_$kind.st"
  corrupt "$kind" "$IN" "in_$kind.st"
  fwd_w "weights: ${WHAT[$kind]}" "w_$kind\\.st" "${PAT[$kind]}" -- "w_$kind.st"
  fwd_in "input: ${WHAT[$kind]}" "in_$kind\\.st" "${PAT[$kind]}" -- "in_$kind.st"
done
# the tensor named for the errors that concern one tensor
fwd_w "weights: data offsets outside name the tensor" "'model\.embed_tokens\.weight'" -- w_offsets_outside.st
fwd_w "weights: F64 names the tensor" "'model\.embed_tokens\.weight'" -- w_f64.st
fwd_in "input: truncated data names the tensor" "'tokens'" -- in_cut_data.st
fwd_w "weights: nonexistent path" 'no_such\.st' 'No such file' -- no_such.st
fwd_in "input: nonexistent path" 'no_such\.st' 'No such file' -- no_such.st
mkdir a_dir.st
fwd_w "weights: a directory as path" 'a_dir\.st' '[Dd]irectory' -- a_dir.st
fwd_in "input: a directory as path" 'a_dir\.st' '[Dd]irectory' -- a_dir.st

st raw "$IN" in_array.st '[1, 2, 3]'
fwd_in "input: header is a JSON array" 'in_array\.st' 'object' -- in_array.st
st raw "$IN" in_nested.st "$(printf '%*s' 20000 '' | tr ' ' '[')"
fwd_in "input: deeply nested JSON" 'in_nested\.st' 'JSON' -- in_nested.st
st raw "$IN" in_dup.st '{"tokens": {"dtype": "I32", "shape": [2, 7], "data_offsets": [0, 56]}, "tokens": {"dtype": "I32", "shape": [2, 7], "data_offsets": [0, 56]}}'
fwd_in "input: the same tensor twice" 'in_dup\.st' "'tokens'" -- in_dup.st
st hdr "$IN" in_reversed.st 'h["tokens"]["data_offsets"] = [56, 0]'
fwd_in "input: reversed data offsets" 'in_reversed\.st' "'tokens'" -- in_reversed.st
st hdr "$IN" in_float_offsets.st 'h["tokens"]["data_offsets"] = [0.5, 56]'
fwd_in "input: fractional data offsets" 'in_float_offsets\.st' "'tokens'" 'data_offsets' -- in_float_offsets.st
st hdr "$IN" in_nbytes.st 'h["tokens"]["shape"] = [2, 8]'
fwd_in "input: shape and byte count disagree" 'in_nbytes\.st' "'tokens'" '56' '64' -- in_nbytes.st
st hdr "$IN" in_negshape.st 'h["tokens"]["shape"] = [-2, 7]'
fwd_in "input: negative size in a shape" 'in_negshape\.st' "'tokens'" 'shape' -- in_negshape.st
st hdr "$IN" in_nodtype.st 'del h["tokens"]["dtype"]'
fwd_in "input: no dtype" 'in_nodtype\.st' "'tokens'" 'dtype' -- in_nodtype.st
st hdr "$IN" in_meta.st 'h["__metadata__"] = {"step": 3}'
fwd_in "input: metadata value not a string" 'in_meta\.st' '__metadata__' -- in_meta.st

# ---- input tokens ---------------------------------------------------------------------------

TOK='[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]'
st make in_vocab.st '{"tokens": ["I32", [2, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 61, 12, 13, 14]]}'
fwd_in "tokens: id >= vocab" 'tokens\[1,3\] = 61 is outside the vocabulary' -- in_vocab.st
st make in_neg.st '{"tokens": ["I32", [2, 7], [1, 2, 3, -1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]]}'
fwd_in "tokens: negative id" 'tokens\[0,3\] = -1 is outside the vocabulary' -- in_neg.st
st make in_f32.st "{\"tokens\": [\"F32\", [2, 7], $TOK]}"
fwd_in "tokens: F32" 'in_f32\.st' "'tokens'" 'F32' 'I32' -- in_f32.st
st make in_rank1.st "{\"tokens\": [\"I32\", [14], $TOK]}"
fwd_in "tokens: rank 1" 'in_rank1\.st' "'tokens'" '\[14\]' -- in_rank1.st
st make in_rank3.st "{\"tokens\": [\"I32\", [1, 2, 7], $TOK]}"
fwd_in "tokens: rank 3" 'in_rank3\.st' "'tokens'" '\[1, ?2, ?7\]' -- in_rank3.st
st make in_empty_b.st '{"tokens": ["I32", [0, 7], []]}'
fwd_in "tokens: batch of 0" 'in_empty_b\.st' "'tokens'" -- in_empty_b.st
st make in_none.st '{}'
fwd_in "tokens: no tensors at all" 'in_none\.st' "'tokens'" -- in_none.st
st make in_ids.st "{\"input_ids\": [\"I32\", [2, 7], $TOK]}"
fwd_in "tokens: missing, another name instead" 'in_ids\.st' "'input_ids'" "'tokens'" -- in_ids.st
st make in_more.st "{\"tokens\": [\"I32\", [2, 7], $TOK], \"mask\": [\"I32\", [2, 7], $TOK]}"
fwd_in "tokens: an extra tensor in the input" 'in_more\.st' "'mask'" -- in_more.st
st make in_newline.st "{\"tokens\": [\"I32\", [2, 7], $TOK], \"a\\nb\": [\"I32\", [1], [0]]}"
fwd_in "tokens: an extra tensor with a newline in its name" 'in_newline\.st' -- in_newline.st

# ---- output -------------------------------------------------------------------------------------

t "-o into a nonexistent directory" 1 'no_dir/out\.st' 'No such file' -- "${FWD[@]}" --weights "$W" --input "$IN" -o no_dir/out.st
t "init -o into a nonexistent directory" 1 'no_dir/out\.st' 'No such file' -- "${TINY[@]}" -o no_dir/out.st
mkdir out_dir.st
t "-o is a directory" 1 'out_dir\.st' '[Dd]irectory' -- "${TINY[@]}" -o out_dir.st
# a failed command never clobbers an existing file (keep.safetensors is from the control init)
t "failed init keeps an existing -o file" 1 "$LOC" 'n_heads' -- "${TINY[@]}" --set n_heads=5 -o keep.safetensors
t "failed forward keeps an existing -o file" 1 'tokens\[1,3\]' -- "${FWD[@]}" --weights "$W" --input in_vocab.st -o keep.safetensors
t "failed forward with -o naming the weights" 1 "'model\.layers\.1\.mlp\.up_proj\.weight'" -- "${FWD[@]}" --weights w_missing.st --input "$IN" -o w_missing.st

# ---- compiled packages and the cpu target ---------------------------------------------------------

ok "compile a package with weights" compile "$MODEL" "${SETS[@]}" --target cpu --weights "$W" --batch 2 --seq 7 -o pkg
ok "compile a package without weights" compile "$MODEL" "${SETS[@]}" --target cpu --batch 2 --seq 7 -o pkg_now
ok "forward a package" forward pkg --input "$IN" -o pkg_out.safetensors
rm -f pkg_out.safetensors
cp -r pkg pkg_v99 && sed -i 's/"version":[[:space:]]*[0-9]*/"version": 99/' pkg_v99/package.json
cp -r pkg pkg_cut && head -c 300 pkg/package.json >pkg_cut/package.json
cp -r pkg pkg_noso && rm pkg_noso/kernels.so
cp -r pkg pkg_badso && head -c 1000 pkg/kernels.so >pkg_badso/kernels.so
t "package: another format version" 1 'pkg_v99' 'version 99' -- forward pkg_v99 --input "$IN" -o out.safetensors
t "package: truncated package.json" 1 'pkg_cut' 'JSON|damaged' -- forward pkg_cut --input "$IN" -o out.safetensors
t "package: kernels.so missing" 1 'pkg_noso' 'kernels' -- forward pkg_noso --input "$IN" -o out.safetensors
t "package: kernels.so truncated" 1 'pkg_badso' 'kernels' -- forward pkg_badso --input "$IN" -o out.safetensors
st make in_shape.st '{"tokens": ["I32", [1, 8], [1, 2, 3, 4, 5, 6, 7, 8]]}'
t "package: input longer than compiled" 1 "'tokens'" '\[1,8\]' '\[1\.\.2,1\.\.7\]' -- forward pkg --input in_shape.st -o out.safetensors
st make in_rank.st '{"tokens": ["I32", [3], [1, 2, 3]]}'
t "package: input of another rank" 1 "'tokens'" '\[3\]' 'expected I32 \[B, T\]' -- forward pkg --input in_rank.st -o out.safetensors
t "package: token outside the vocabulary" 1 'tokens\[1,3\]' -- forward pkg --input in_vocab.st -o out.safetensors
t "package: --threads 0" 1 '--threads 0' -- forward pkg --input "$IN" -o out.safetensors --threads 0
t "package without weights, none given" 1 'pkg_now' '--weights' -- forward pkg_now --input "$IN" -o out.safetensors
ok "init weights of another config" init "$MODEL" --preset tiny -o tiny_w.safetensors
t "package: weights for another config" 1 'tiny_w\.safetensors' "model\." -- forward pkg_now --weights tiny_w.safetensors --input "$IN" -o out.safetensors
t "package with weights given more" 1 'pkg' 'weights' -- forward pkg --weights "$W" --input "$IN" -o out.safetensors
t "package: --preset does not apply" 2 'package' -- forward pkg --preset tiny --input "$IN" -o out.safetensors
t "cpu target: --threads 0" 1 '--threads 0' -- "${FWD[@]}" --weights "$W" --input "$IN" -o out.safetensors --target cpu --threads 0
t "profile: --threads 0" 1 '--threads 0' -- profile pkg --input "$IN" --threads 0 -o trace.json
t "profile: missing input file" 1 'nope\.st' -- profile pkg --input nope.st -o trace.json
t "profile without --input" 2 '--input' -- profile pkg
t "profile: unknown target" 2 'target' -- profile pkg --input "$IN" --target tpu
t "profile: token outside the vocabulary" 1 'tokens\[1,3\]' -- profile pkg --input in_vocab.st -o trace.json
# cuda: compiling needs NVRTC only; running says what this machine lacks
ok "compile a cuda package" compile "$MODEL" "${SETS[@]}" --target cuda --arch sm_80 --weights "$W" --batch 2 --seq 7 -o pkg_cu
t "cuda: an architecture NVRTC cannot target" 1 'sm_99' 'nvrtc' -- compile "$MODEL" "${SETS[@]}" --target cuda --arch sm_99 -o pkg_x
t "cuda: not an architecture" 1 'sm_1\b' 'sm_XX' -- compile "$MODEL" "${SETS[@]}" --target cuda --arch sm_1 -o pkg_x
t "cuda: --arch for the cpu target" 2 '--arch' -- compile "$MODEL" "${SETS[@]}" --target cpu --arch sm_90 -o pkg_x
t "cuda: --precision not bf16 or f32" 2 'f16' 'bf16 or f32' -- compile "$MODEL" "${SETS[@]}" --target cuda --precision f16 -o pkg_x
t "cuda: --precision for the cpu target" 2 '--precision' -- compile "$MODEL" "${SETS[@]}" --target cpu --precision f32 -o pkg_x
t "cuda: backward --precision on ref" 1 '--precision' 'cuda' -- backward "$MODEL" "${SETS[@]}" --weights "$W" --input "$IN" -o g_x.st --precision f32
# no driver, on any machine: a libcuda.so.1 that cannot load comes first on
# the library path (dlopen stops at it), so these run where a GPU is too
NODRIVER=$CAP/nodriver
mkdir -p "$NODRIVER" && echo "not a library" >"$NODRIVER/libcuda.so.1"
nodrv() { LD_LIBRARY_PATH="$NODRIVER${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" t "$@"; }
nodrv "cuda package without a GPU" 1 'pkg_cu' 'cuda' 'NVIDIA driver' -- forward pkg_cu --input "$IN" -o out.safetensors
nodrv "backward --target cuda without a GPU" 1 'cuda' 'NVIDIA driver' -- backward "$MODEL" "${SETS[@]}" --weights "$W" --input "$IN" -o g.st --target cuda
nodrv "profile of a cuda package without a GPU" 1 'pkg_cu' 'NVIDIA driver' -- profile pkg_cu --input "$IN" -o tr.json
nodrv "profile --target cuda without a GPU" 1 'cuda' 'NVIDIA driver' -- profile "$MODEL" "${SETS[@]}" --weights "$W" --input "$IN" --target cuda
t "profile --target cuda without --weights" 2 'weights' -- profile "$MODEL" "${SETS[@]}" --input "$IN" --target cuda
cp -r pkg_cu pkg_cu_cut && head -c 2000 pkg_cu/kernels.cubin >pkg_cu_cut/kernels.cubin
t "cuda package: truncated cubin" 1 'kernels\.cubin' 'damaged' -- forward pkg_cu_cut --input "$IN" -o out.safetensors
ok "compile a decoder package" compile "$MODEL" --preset tiny --target cpu --weights tiny_w.safetensors --ctx 16 -o pkg_dec
ok "generate from a decoder package" generate pkg_dec --prompt "In the" -n 4 --seed 1
t "generate: prompt longer than the context" 1 'prompt' 'context' -- generate pkg_dec --prompt "In the beginning God created" -n 2
t "generate: prompt and tokens past the context" 1 'context holds 16' -- generate pkg_dec --prompt "In the" -n 20
t "generate: --ctx shorter than the prompt" 1 'longer than the context' -- generate "$MODEL" --preset tiny --weights tiny_w.safetensors --prompt "In the beginning" --ctx 4
t "generate: vocabulary under 256" 1 'vocabulary' '256' -- generate "$MODEL" "${SETS[@]}" --weights "$W" --prompt "In" -n 2
t "generate: --threads 0" 1 '--threads 0' -- generate pkg_dec --prompt "In" -n 2 --threads 0
t "generate: a whole-sequence package" 1 'pkg' '--ctx' -- generate pkg --prompt "In" -n 2
t "generate: empty prompt" 1 'prompt' -- generate pkg_dec --prompt "" -n 2
t "generate: negative temperature" 2 '--temperature' -- generate pkg_dec --prompt "In" --temperature -1
t "generate: -n abc" 2 '-n abc' -- generate pkg_dec --prompt "In" -n abc
t "generate without --prompt" 2 '--prompt' -- generate pkg_dec
# a model mixing positions other than by causal attention has no one-token
# decoding step: a cumsum or a scan over the sequence, an arange as long as it
model cumsum.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d = 8, vocab = 256 }, presets = {} }
function M.build(cfg, tokens)
  local x = nn.embedding("embed", cfg.vocab, cfg.d)(tokens)
  local q = lrc.reshape(x, { x.shape[1], x.shape[2], 2, 4 })
  local a = lrc.reshape(lrc.attention(q, q, q, { causal = true, scale = 0.5 }), x.shape)
  local m = lrc.cumsum(a, { axis = 1 })
  return nn.linear("head", cfg.d, cfg.vocab)(a + m)
end
return M
EOF
ok "init the cumsum model" init cumsum.lua -o cumsum_w.safetensors
t "generate: cumsum over the sequence" 1 'cumsum\.lua:8: ' 'cumsum sums .*decoding.* sequence' -- generate cumsum.lua --weights cumsum_w.safetensors --prompt "In" -n 2
sed 's/lrc\.cumsum(a, /lrc.scan(a, a, /' cumsum.lua >scan.lua
ok "init the scan model" init scan.lua -o scan_w.safetensors
t "generate: scan over the sequence" 1 'scan\.lua:8: ' 'scan scans .*decoding.* sequence' -- generate scan.lua --weights scan_w.safetensors --prompt "In" -n 2
sed 's/lrc\.cumsum(a, { axis = 1 })/a * lrc.reshape(lrc.cast(lrc.arange(x.shape[2]), "f32"), { x.shape[2], 1 })/' cumsum.lua >arange.lua
ok "init the arange model" init arange.lua -o arange_w.safetensors
t "generate: arange over the sequence" 1 'arange\.lua:8: ' 'arange counts positions .*decoding.* sequence' -- generate arange.lua --weights arange_w.safetensors --prompt "In" -n 2
t "-n on another command" 2 '-n' -- inspect llama -n 3
t "inspect: unknown target" 2 "unknown target 'gpu'" 'ref, cpu or cuda' -- inspect llama --target gpu
ok "backward on a fixture" backward "$MODEL" "${SETS[@]}" --weights "$W" --input "$IN" -o grads_ok.safetensors
rm -f grads_ok.safetensors
st make in_badlabel.st '{"tokens": ["I32", [2, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]], "labels": ["I32", [2, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 61, 12, 13, -100]]}'
t "backward: a label outside the vocabulary" 1 'labels\[1,3\] = 61' -- backward "$MODEL" "${SETS[@]}" --weights "$W" --input in_badlabel.st -o grads.safetensors
st make in_labshape.st '{"tokens": ["I32", [2, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]], "labels": ["I32", [14], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]]}'
t "backward: labels of another shape" 1 "'labels'" -- backward "$MODEL" "${SETS[@]}" --weights "$W" --input in_labshape.st -o grads.safetensors
t "backward: token outside the vocabulary" 1 'tokens\[1,3\]' -- backward "$MODEL" "${SETS[@]}" --weights "$W" --input in_vocab.st -o grads.safetensors
t "backward: --target gpu" 1 'target' -- backward "$MODEL" "${SETS[@]}" --weights "$W" --input "$IN" -o grads.safetensors --target gpu
t "backward: --threads 0" 1 '--threads 0' -- backward "$MODEL" "${SETS[@]}" --weights "$W" --input "$IN" -o grads.safetensors --target cpu --threads 0
t "backward: missing weights tensor" 1 'w_missing\.st' -- backward "$MODEL" "${SETS[@]}" --weights w_missing.st --input "$IN" -o grads.safetensors
t "backward without -o" 2 '-o' -- backward "$MODEL" "${SETS[@]}" --weights "$W" --input "$IN"
for i in $(seq 1 60); do echo "In the beginning God created the heaven and the earth."; done >text.txt
TR=(train "$MODEL" --preset tiny --steps 4 --lr 1e-3 --batch 2 --seq 16 --threads 2)
ok "train a tiny run" "${TR[@]}" --data text.txt -o run_ok
: >empty.txt
t "train: empty data file" 1 'empty\.txt' 'bytes' -- "${TR[@]}" --data empty.txt -o run_x
printf 'short' >short.txt
t "train: data too short" 1 'short\.txt' -- "${TR[@]}" --data short.txt -o run_x
t "train: missing data file" 1 'nope\.txt' -- "${TR[@]}" --data nope.txt -o run_x
nodrv "train --target cuda without a GPU" 1 'cuda' 'NVIDIA driver' -- "${TR[@]}" --data text.txt -o run_x --target cuda
t "train: --target tpu" 2 'tpu' -- "${TR[@]}" --data text.txt -o run_x --target tpu
t "train: --steps 0" 1 '--steps 0' -- train "$MODEL" --preset tiny --steps 0 --lr 1e-3 --data text.txt -o run_x
t "train: --lr not a number" 2 '--lr abc' -- train "$MODEL" --preset tiny --steps 4 --lr abc --data text.txt -o run_x
t "train: run directory exists" 1 'run_ok' 'resume' -- "${TR[@]}" --data text.txt -o run_ok
t "train: vocabulary under 256" 1 'vocabulary' -- train "$MODEL" "${SETS[@]}" --steps 4 --lr 1e-3 --seq 16 --data text.txt -o run_x
t "train: --resume of a missing run" 1 'nope_run' -- train --resume nope_run
t "train: --resume with an option it would ignore" 2 '--weight-decay' 'run\.json' -- train --resume run_ok --weight-decay 0.1
t "train: --resume with a model" 2 'llama' '--resume' -- train llama --resume run_ok
cp -r run_ok run_cut && head -c 1000 run_ok/checkpoint.safetensors >run_cut/checkpoint.safetensors
t "train: --resume a truncated checkpoint" 1 'checkpoint\.safetensors' -- train --resume run_cut
cp -r run_ok run_other && cp w.safetensors run_other/checkpoint.safetensors
t "train: --resume a checkpoint of another model" 1 'checkpoint\.safetensors' -- train --resume run_other
t "train: --threads 0" 1 '--threads 0' -- "${TR[@]}" --data text.txt -o run_x --threads 0
t "train without -o" 2 '-o' -- train "$MODEL" --preset tiny --steps 4 --lr 1e-3
t "train: --weight-decay 2" 2 '--weight-decay 2' -- "${TR[@]}" --data text.txt -o run_x --weight-decay 2
t "train: --accum 0" 2 '--accum 0' -- "${TR[@]}" --data text.txt -o run_x --accum 0
t "train: --clip not a number" 2 '--clip x' -- "${TR[@]}" --data text.txt -o run_x --clip x
t "compile: unknown target" 1 'target' -- compile "$MODEL" "${SETS[@]}" --target tpu -o pkg_tpu
t "compile: -o is a regular file" 1 'keep\.safetensors' 'not an lrc package' -- compile "$MODEL" "${SETS[@]}" --target cpu -o keep.safetensors
t "compile without -o" 2 '-o' -- compile "$MODEL" "${SETS[@]}" --target cpu
t "compile: bad weights" 1 'w_missing\.st' -- compile "$MODEL" "${SETS[@]}" --target cpu --weights w_missing.st -o pkg_bad

# ---- ViT and Parcae ------------------------------------------------------------------------------------

VIT=$ROOT/models/vit.lua
PARCAE=$ROOT/models/parcae.lua
"$LRC" init "$VIT" --preset tiny -o vit_w.safetensors >/dev/null
"$LRC" init "$VIT" --preset tiny --set image_size=28 -o vit_w28.safetensors >/dev/null
"$LRC" init "$PARCAE" --preset tiny -o parcae_w.safetensors >/dev/null
t "vit: image size not divisible by the patch" 1 'vit\.lua:[0-9]+: ' 'image_size \(28\) is not divisible by patch \(5\)' -- inspect "$VIT" --set patch=5
t "vit: unknown norm" 1 'vit\.lua:[0-9]+: ' 'pre or layerrope' -- inspect "$VIT" --set norm=post
mkdir -p idx_empty idx_bad
t "vit train: missing IDX files" 1 'idx_empty/train-images-idx3-ubyte' 'not found' -- train "$VIT" --steps 2 --lr 1e-3 --batch 4 --data idx_empty -o run_vit
printf 'not gzip, not IDX' >idx_bad/train-images-idx3-ubyte.gz
for f in train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do printf 'x' >"idx_bad/$f.gz"; done
t "vit train: corrupt IDX file" 1 'idx_bad/train-images-idx3-ubyte\.gz' -- train "$VIT" --steps 2 --lr 1e-3 --batch 4 --data idx_bad -o run_vit
t "vit eval: corrupt IDX file" 1 'idx_bad/' -- eval "$VIT" --preset tiny --set image_size=28 --weights vit_w28.safetensors --data idx_bad
t "eval of a language model on a directory" 1 'idx_empty' -- eval "$MODEL" "${SETS[@]}" --weights "$W" --data idx_empty
t "eval without --weights" 2 '--weights' -- eval "$VIT"
t "parcae: T = 0" 1 'parcae\.lua:[0-9]+: ' 'T must be a positive integer' -- inspect "$PARCAE" --preset tiny --set T=0
t "parcae: T = -3" 1 'T must be a positive integer' -- inspect "$PARCAE" --preset tiny --set T=-3
t "parcae: unknown state_init" 1 'like-init or zero' -- inspect "$PARCAE" --preset tiny --set state_init=random
st make in_p.st '{"tokens": ["I32", [2, 3], [1, 2, 3, 4, 5, 6]]}'
st make in_pneg.st '{"tokens": ["I32", [2, 3], [1, 2, 3, 4, 5, 6]], "iterations": ["I32", [2], [3, -1]]}'
st make in_pbad.st '{"tokens": ["I32", [2, 3], [1, 2, 3, 4, 5, 6]], "iterations": ["I32", [3], [3, 3, 3]]}'
t "parcae: a ViT checkpoint" 1 'vit_w\.safetensors holds none of this model' 'another model' -- forward "$PARCAE" --preset tiny --weights vit_w.safetensors --input in_p.st -o out.safetensors
t "vit: a Parcae checkpoint" 1 'parcae_w\.safetensors holds none of this model' -- eval "$VIT" --weights parcae_w.safetensors --data idx_bad
t "parcae: a negative iteration count" 1 'iterations\[1\] = -1' -- forward "$PARCAE" --preset tiny --weights parcae_w.safetensors --input in_pneg.st -o out.safetensors --target cpu
t "parcae: a negative iteration count (ref)" 1 'iteration count' -- forward "$PARCAE" --preset tiny --weights parcae_w.safetensors --input in_pneg.st -o out.safetensors
t "parcae: counts of another shape" 1 'iterations' -- forward "$PARCAE" --preset tiny --weights parcae_w.safetensors --input in_pbad.st -o out.safetensors
t "parcae: --set T=0 at run time" 1 'T must be a positive integer' -- forward "$PARCAE" --preset tiny --set T=0 --weights parcae_w.safetensors --input in_p.st -o out.safetensors
t "vit: tokens for an image model" 1 'images' -- forward "$VIT" --preset tiny --weights vit_w.safetensors --input in_p.st -o out.safetensors
t "vit: generate text with an image model" 1 'vit\.lua is an image model' -- generate "$VIT" --preset tiny --weights vit_w.safetensors --prompt ab -n 2
t "parcae: generate (no KV-cache decoding of QK-norm)" 1 'parcae\.lua:[0-9]+: ' 'KV cache' -- generate "$PARCAE" --preset tiny --weights parcae_w.safetensors --prompt ab -n 2
# after a loop only its final state is defined: reading the state or a body value there is an error
model loop_side.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d = 8, vocab = 16, T = 3 }, presets = {} }
function M.build(cfg, tokens)
  local e = nn.embedding("emb", cfg.vocab, cfg.d)(tokens)
  local counts = lrc.input("iterations", { tokens.shape[1] }, "i32")
  local side
  local h = nn.loop(e * 1.0, counts, function(h) side = lrc.silu(h) * 2.0; return lrc.silu(h) + e end)
  return nn.linear("head", cfg.d, cfg.vocab)(h + side)
end
return M
EOF
sed 's/side = lrc.silu(h) \* 2.0/side = h/' loop_side.lua >loop_state.lua
t "loop: a body value read after the loop" 1 'loop_side\.lua:9: ' "a value of a loop's body" 'final state' -- inspect loop_side.lua
t "loop: the state read after the loop" 1 'loop_state\.lua:9: ' "a value of a loop's body" -- inspect loop_state.lua
"$LRC" compile "$PARCAE" --preset tiny --set state_init=zero --batch 2 --seq 3 --target cpu -o pkg_loop >/dev/null
cp -r pkg_loop pkg_loop_bad
"$PY" - pkg_loop_bad/package.json <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
edge = next(l for l in p["launches"] if "loop_to" in l)
edge["args"][1] = next(i for i, b in enumerate(p["buffers"]) if b.get("name") == "tokens")  # h_next := the tokens
json.dump(p, open(sys.argv[1], "w"))
PYEOF
t "loop: a package whose back edge copies the tokens" 1 'pkg_loop_bad' 'damaged package' -- forward pkg_loop_bad --weights parcae_w.safetensors --input in_p.st -o out.safetensors

# ---- usage (exit status 2) --------------------------------------------------------------------------

t "gemm-bench: an unknown GEMM form" 2 'op matmul_tt: expected matmul, matmul_nn or matmul_tn' -- gemm-bench --op matmul_tt --m 2 --n 2 --k 2
t "unknown command: lists every command" 2 "'frobnicate'" 'inspect, init, train, eval, plot, sweep, diagnose, analyze, backward, compile, export, forward, generate, tokenize, profile, demo, gemm-bench, devices' -- frobnicate llama
t "unknown option" 2 '--bogus' -- inspect llama --bogus
t "unknown short option" 2 '-x' -- init llama -x -o out.safetensors
t "missing MODEL" 2 'MODEL' -- inspect
t "unexpected argument" 2 "'extra'" -- inspect llama extra
t "init without -o" 2 '-o' -- init llama --preset tiny
t "-o without its value" 2 '-o' -- init llama --preset tiny -o
t "--set without its value" 2 '--set' -- inspect llama --set
t "forward without --weights" 2 '--weights' -- "${FWD[@]}" --input "$IN" -o out.safetensors
t "forward without --input" 2 '--input' -- "${FWD[@]}" --weights "$W" -o out.safetensors
t "forward without -o" 2 '-o' -- "${FWD[@]}" --weights "$W" --input "$IN"
t "--seed -1" 2 '--seed -1' -- init llama --preset tiny --seed -1 -o out.safetensors
t "--seed abc" 2 '--seed abc' -- init llama --preset tiny --seed abc -o out.safetensors
t "--seed out of range" 2 '--seed' -- init llama --preset tiny --seed 99999999999999999999 -o out.safetensors
t "--seq 0" 2 '--seq 0' -- inspect llama --preset tiny --seq 0
t "--seq out of range" 2 '--seq' -- inspect llama --preset tiny --seq 99999999999999999999
t "--batch x" 2 '--batch x' -- inspect llama --preset tiny --batch x
t "unknown --target" '1|2' "'?gpu'?" -- "${FWD[@]}" --weights "$W" --input "$IN" -o out.safetensors --target gpu
t "demo with a 1-byte prompt" 2 '--prompt' -- demo --prompt a

# ---- lrc sweep: the grid checked before any run starts (no directory made) ----
t "sweep: an empty grid" 1 'sweep: --grid lr=: an empty value' -- sweep llama --preset tiny --grid lr= --steps 2 -o sw
t "sweep: an unknown key" 1 "sweep: --grid foo=1: --set foo=1: unknown config key 'foo'" -- sweep llama --preset tiny --grid foo=1,2 --steps 2 --lr 1e-3 -o sw
t "sweep: a rate <= 0" 1 "sweep: --grid lr: '-1e-3' is not a rate > 0" -- sweep llama --preset tiny --grid lr=1e-3,-1e-3 --steps 2 -o sw
t "sweep: a value of the wrong type" 1 'sweep: --grid n_layers=two: --set n_layers=two: expected an integer' -- sweep llama --preset tiny --grid n_layers=2,two --steps 2 --lr 1e-3 -o sw
t "sweep: --table of a directory that is not a sweep" 1 'sweep: tablex is not a sweep \(no sweep.jsonl\)' -- sweep --table tablex
t "sweep: --lr beside --grid lr" 2 '--lr and --grid lr both' -- sweep llama --preset tiny --grid lr=1e-3 --lr 1e-3 --steps 2 -o sw

# ---- lrc diagnose of a model without a loop, and lrc.tap ----------------------
model tap.lua <<'EOF'
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d_model = 8, vocab = 16 }, presets = {} }
function M.build(cfg, tokens)
  local h = lrc.tap("residual.0", nn.embedding("embed", cfg.vocab, cfg.d_model)(tokens))
  return nn.linear("head", cfg.d_model, cfg.vocab)(lrc.tap("residual.0", h))
end
return M
EOF
sed 's/lrc.tap("residual.0", h)/lrc.tap("residual.1", 3)/' tap.lua >tapnum.lua
"$LRC" init good.lua -o good_w.safetensors >/dev/null
"$LRC" init tap.lua -o tap_w.safetensors >/dev/null
st make in16.st '{"tokens": ["I32", [1, 4], [1, 2, 3, 4]]}'
st make noseq.st '{"ids": ["I32", [1, 4], [1, 2, 3, 4]]}'
t "diagnose: a model that taps no residual stream" 1 'good\.lua taps no residual stream' 'lrc\.tap\("residual\.L", h\)' -- diagnose good.lua --weights good_w.safetensors --input in16.st
t "diagnose: --input without tokens" 1 "noseq\.st: expected a tensor 'tokens' of I32 \[B, T\]" -- diagnose good.lua --weights good_w.safetensors --input noseq.st
t "diagnose: byte windows for a vocabulary under 256" 1 'vocabulary of at least 256' -- diagnose good.lua --weights good_w.safetensors --data "$ROOT/README.md"
t "diagnose: an image model without --input" 1 'vit\.lua is an image model: give its images with --input' -- diagnose "$VIT" --preset tiny --weights vit_w.safetensors
t "diagnose: images of another size" 1 "in16\.st: expected a tensor 'images' of F32 \[B, 1, 8, 8\]" -- diagnose "$VIT" --preset tiny --weights vit_w.safetensors --input in16.st
t "lrc.tap: one name twice" 1 'tap\.lua:[0-9]+: ' "lrc.tap: 'residual.0' is tapped twice" -- diagnose tap.lua --weights tap_w.safetensors --input in16.st
t "lrc.tap of a number" 1 'tapnum\.lua:[0-9]+: ' 'lrc.tap: the second argument must be a tensor, got number' -- init tapnum.lua -o out.safetensors

# ---- lrc analyze ----------------------------------------------------------------
mkdir -p notarun
st make nonorm.st '{"embed.weight": ["F32", [2, 2], [1, 2, 3, 4]]}'
"$LRC" init llama --preset tiny --set norm=layerrope -o lr_w.safetensors >/dev/null
t "analyze: a checkpoint with no norm weights" 1 'nonorm\.st has no norm weights' -- analyze nonorm.st
t "analyze: a directory that is not a run" 1 'notarun is neither a run \(run\.json\) nor a Hugging Face model' -- analyze notarun
t "analyze: LayerRoPE weights without a depth" 1 'give --layers N' -- analyze lr_w.safetensors
t "analyze: --layers 0" 2 '--layers 0' -- analyze lr_w.safetensors --layers 0
t "analyze: a missing file" 1 'nothere\.st' -- analyze nothere.st
t "analyze: two checkpoints" 2 'one CHECKPOINT' -- analyze lr_w.safetensors nonorm.st
"$LRC" init llama --preset tiny --set norm=post -o post_w.safetensors >/dev/null
t "analyze: --fit-layerrope of a Post-Norm checkpoint" 1 'a Post-Norm checkpoint' -- analyze post_w.safetensors --fit-layerrope fit.st
t "analyze: --layerrope-base 1" 2 '--layerrope-base 1: expected a number above 1' -- analyze post_w.safetensors --fit-layerrope fit.st --layerrope-base 1
t "analyze: --plot into a missing directory" 1 '--plot: nodir/p: cannot write in nodir: No such file or directory' -- analyze lr_w.safetensors --layers 2 --plot nodir/p
t "analyze: --trajectory-tol 0" 2 '--trajectory-tol 0: expected a positive number' -- analyze post_w.safetensors --trajectory-tol 0
t "analyze: --head-dim 0" 2 '--head-dim 0: expected a positive integer' -- analyze post_w.safetensors --head-dim 0
t "analyze: --fit-layerrope of LayerRoPE weights" 1 'no per-layer gains of an even width to fit' -- analyze lr_w.safetensors --layers 2 --fit-layerrope fit.st

echo "$passed passed, $failed failed"
[ $((passed + failed)) -gt 0 ] || { echo "errors.sh: no case ran" >&2; exit 1; }
[ "$failed" -eq 0 ]
