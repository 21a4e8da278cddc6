#!/bin/bash
# commands.sh LRC MODELS_DIR ST_COMPARE CUEMU_DIR — the commands and options
# no other test runs, each checked against a result computed here: inspect's
# FLOPs against the closed form of ir/ops.c's rules, its IR, kernels and
# passes; --repeat leaving the outputs as one run does; F16 and BF16 weights
# against F32 files of the same rounded values; generate's greedy decoding
# against forward's argmax, its seeds; a language model's eval loss against
# forward's logits on the windows eval draws (its RNG replayed here);
# diagnose's Jacobian against the rate its own iterations converge at;
# gemm-bench's check (f32 and bf16 weights); devices against /proc/cpuinfo and the CUDA toolkit.
set -u
lrc=$(readlink -f "$1") models=$(readlink -f "$2") compare=$(readlink -f "$3") cuemu=$(readlink -f "$4")
llama=$models/llama.lua parcae=$models/parcae.lua
root=$(cd "$(dirname "$0")/../.." && pwd)
st() { /usr/bin/python3 "$root/tests/tools/st.py" "$@"; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi; }
py() { /usr/bin/python3 "$dir/h.py" "$@"; }
cat >"$dir/h.py" <<'PY'
import json, math, re, struct, sys

def load(p):  # name -> (dtype, shape, values as floats or ints)
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h, d = json.loads(b[8:8 + n]), b[8 + n:]
    h.pop("__metadata__", None)
    out = {}
    for k, v in h.items():
        raw = d[v["data_offsets"][0]:v["data_offsets"][1]]
        dt = v["dtype"]
        if dt == "BF16":
            vals = [struct.unpack("<f", struct.pack("<I", x << 16))[0] for x in struct.unpack("<%dH" % (len(raw) // 2), raw)]
        else:
            vals = list(struct.unpack("<%d%s" % (len(raw) // {"F16": 2}.get(dt, 4), {"F32": "f", "I32": "i", "F16": "e"}[dt]), raw))
        out[k] = (dt, v["shape"], vals)
    return out

def save(p, ts):  # name -> (dtype, shape, values)
    h, data = {}, b""
    for k, (dt, shape, vals) in ts.items():
        raw = struct.pack("<%d%s" % (len(vals), {"F32": "f", "I32": "i", "F16": "e"}[dt]), *vals)
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    s = json.dumps(h).encode()
    s += b" " * (-len(s) % 8)
    open(p, "wb").write(struct.pack("<Q", len(s)) + s + data)

def flops(d, L, H, f, V, T, norm):
    """ir/ops.c's rules summed over models/llama.lua's graph, per token:
    (forward, backward) with each op's backward ratio"""
    Dh = d // H
    att = H * T * (T + 1) / 2 * (4 * Dh + 5) / T  # causal pairs per token
    # (forward FLOPs, backward ratio) of each op of one layer
    ops = [(3 * d, 2), (d, 2), (8 * d * d, 2), (8 * d, 1), (att, 2.5), (d, 1),  # rmsnorm, gain, q k v o, 2 ropes, attention, add
           (3 * d, 2), (d, 2), (4 * d * f, 2), (4 * f, 2), (f, 2), (2 * f * d, 2), (d, 1)]  # rmsnorm, gain, gate up, silu, mul, down, add
    if norm == "layerrope":  # the output gains' muls, and 4 sites' depth_gain (8 d each, once per sequence)
        ops += [(2 * d, 2), (4 * 8 * d / T, 2)]
    fwd = L * sum(a for a, _ in ops) + 3 * d + d + 2 * d * V  # final rmsnorm, its gain, lm_head
    bwd = L * sum(a * r for a, r in ops) + 2 * (3 * d + d + 2 * d * V)
    return fwd, fwd + bwd

def splitmix(x):
    x = (x + 0x9e3779b97f4a7c15) & (2**64 - 1)
    z = x
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & (2**64 - 1)
    return x, z ^ (z >> 31)

class Rng:  # runtime/params.c: xoshiro256** seeded by splitmix64
    def __init__(self, seed):
        self.s, x = [], seed
        for _ in range(4):
            x, z = splitmix(x)
            self.s.append(z)
    def next(self):
        M, s = 2**64 - 1, self.s
        rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & M
        r, t = (rotl((s[1] * 5) & M, 7) * 9) & M, (s[1] << 17) & M
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45)
        return r

def windows(text, seq, seed, B, n):
    """runtime/train.c's validation windows, drawn as lrc eval draws them"""
    N = len(text)
    bs = max(1 << 16, 4 * (seq + 1))
    nb = (N + bs - 1) // bs
    if nb < 2:
        bs, nb = N // 2, 2
    cum = [0]
    for i in range(nb):
        lo, hi = i * bs, (N if i == nb - 1 else i * bs + bs)
        val = i % 20 == 19 if nb >= 20 else i == nb - 1
        cum.append(cum[-1] + (hi - lo - seq if val and hi - lo > seq + 1 else 0))
    r, out = Rng(seed + 0x5eed), []
    for _ in range(B * n):
        x = r.next() % cum[nb]
        blk = max(i for i in range(nb) if cum[i] <= x)
        start = blk * bs + (x - cum[blk])
        out.append(text[start:start + seq + 1])
    return out

def ce(row, y):
    m = max(row)
    return m + math.log(sum(math.exp(v - m) for v in row)) - row[y]

cmd, a = sys.argv[1], sys.argv[2:]
if cmd == "flops":  # d L H f V T norm OUTPUT: lrc inspect --flops's two lines against the closed form
    fwd, train = flops(*map(int, a[:6]), a[6])
    got = re.findall(r"^(forward|training)_flops_per_token\s+(\S+)", open(a[7]).read(), re.M)
    want = [("forward", "%.6g" % fwd), ("training", "%.6g" % train)]
    print("FLOPs per token: lrc %s, closed form %s" % (got, want))
    sys.exit(got != want)
elif cmd == "f16":  # IN OUT: every F32 tensor as F16 (struct rounds to nearest even)
    save(a[1], {k: ("F16" if dt == "F32" else dt, s, v) for k, (dt, s, v) in load(a[0]).items()})
elif cmd == "widen":  # IN OUT: every tensor as F32 (exact for F16 and BF16)
    save(a[1], {k: ("F32" if dt != "I32" else dt, s, v) for k, (dt, s, v) in load(a[0]).items()})
elif cmd == "tokens":  # OUT TEXT: one sequence of the text's bytes
    t = list(open(a[1], "rb").read())
    save(a[0], {"tokens": ("I32", [1, len(t)], t)})
elif cmd == "greedy":  # LOGITS PROMPT_LEN TEXT: every byte after the prompt is the argmax of the logits before it
    _, shape, z = load(a[0])["logits"]
    P, text, V = int(a[1]), open(a[2], "rb").read(), shape[2]
    bad, margin = 0, float("inf")
    for t in range(P - 1, len(text) - 1):
        row = z[t * V:t * V + 256]
        order = sorted(range(256), key=lambda i: -row[i])
        margin = min(margin, row[order[0]] - row[order[1]])
        bad += order[0] != text[t + 1]
    print("greedy: %d of %d bytes are not forward's argmax (smallest top-2 gap %.3g)" % (bad, len(text) - P, margin))
    sys.exit(bad != 0 or margin < 1e-5 or len(text) - P < 10)
elif cmd == "windows":  # TEXT SEQ SEED B N OUT: eval's windows as one batch of tokens
    w = windows(open(a[0], "rb").read(), *map(int, a[1:5]))
    save(a[5], {"tokens": ("I32", [len(w), int(a[1])], [c for x in w for c in x[:-1]])})
    open(a[5] + ".labels", "w").write(json.dumps([list(x[1:]) for x in w]))
elif cmd == "evalloss":  # LOGITS LABELS EVAL_OUTPUT: lrc eval's loss against forward's logits
    _, shape, z = load(a[0])["logits"]
    ys = [y for x in json.load(open(a[1])) for y in x]
    V = shape[2]
    mine = sum(ce(z[i * V:(i + 1) * V], y) for i, y in enumerate(ys)) / len(ys)
    got = float(re.search(r"validation loss ([0-9.]+) nats/byte", open(a[2]).read()).group(1))
    print("eval loss: lrc %.4f, from forward's logits %.6f" % (got, mine))
    sys.exit(abs(got - mine) > 5e-5 + 1e-6)  # lrc prints 4 decimals
elif cmd == "diagnose":  # OUT_T3 OUT_T6 RESID_A RESID_B STEPS_A STEPS_B
    def rows(p):
        return [tuple(map(float, l.split())) for l in open(p) if re.match(r"^\s+\d+\s+\S+\s+\S+$", l)]
    r3, r6 = rows(a[0]), rows(a[1])
    text6 = open(a[1]).read()
    rho, sigma = map(float, re.search(r"spectral radius (\S+), operator norm (\S+),", text6).groups())
    res = [float(re.search(r"relative residual (\S+);", open(p).read()).group(1)) for p in a[2:4]]
    na, nb = int(a[4]), int(a[5])
    rate = (res[1] / res[0]) ** (1 / (nb - na))  # the fixed-point iteration converges at the Jacobian's rate
    norms = [r[1] for r in r6]
    ratios = [(norms[i + 2] - norms[i + 1]) / (norms[i + 1] - norms[i]) for i in range(len(norms) - 2)]
    print("diagnose: rows T=3 %s, T=6 %s; rho %.4f, sigma %.4f; residual rate %.4f; state-norm step ratios %s"
          % (len(r3), len(r6), rho, sigma, rate, ["%.3f" % x for x in ratios]))
    ok = [len(r3) == 3 and len(r6) == 6, [r[0] for r in r6] == [1, 2, 3, 4, 5, 6], r6[:3] == r3,
          sigma >= rho - 1e-9, 0 < rho < 1, abs(rate - rho) < 0.02 * rho, abs(ratios[-1] - rho) < 0.1 * rho]
    print("diagnose checks:", ok)
    sys.exit(not all(ok))
PY

for i in $(seq 1 60); do
  echo "In the beginning God created the heaven and the earth. And the earth was without form, and void."
done >text.txt
tiny=(--preset tiny)
"$lrc" init llama "${tiny[@]}" -o pre.st >/dev/null
"$lrc" init llama "${tiny[@]}" --set norm=layerrope --seed 1 -o lr.st >/dev/null

# ---- inspect --flops: the closed form of ir/ops.c's FLOP rules over llama.lua's graph
"$lrc" inspect llama "${tiny[@]}" --seq 16 --flops >fl1.txt
check "inspect --flops: tiny, T=16" "py flops 32 2 2 88 256 16 pre fl1.txt"
"$lrc" inspect llama "${tiny[@]}" --set d_ff=40 --set n_layers=3 --set n_heads=4 --seq 24 --flops >fl2.txt
check "inspect --flops: d_ff 40, 3 layers, 4 heads, T=24" "py flops 32 3 4 40 256 24 pre fl2.txt"
"$lrc" inspect llama "${tiny[@]}" --set norm=layerrope --seq 16 --flops >fl3.txt
check "inspect --flops: layerrope" "py flops 32 2 2 88 256 16 layerrope fl3.txt"

# ---- inspect --ir / --after / --kernels / --weights / --target
hist() { awk '$2 == "=" { n[$3]++ } END { for (k in n) printf "%s=%d ", k, n[k] }' "$1" | tr ' ' '\n' | sort | tr '\n' ' '; }
has() { hist "$1" | grep -qw -- "$2"; }
"$lrc" inspect llama "${tiny[@]}" --seq 16 --ir >ir_pre.txt
# per layer 7 matmuls, 2 ropes, 1 attention, 2 rmsnorms, 3 muls, 7 weights and 2 gains, 31 nodes;
# then the embedding (3 nodes with tokens) and the head: rmsnorm, gain, mul, lm_head, matmul
check "inspect --ir: the ops of 2 pre-norm layers" \
  "has ir_pre.txt matmul=15 && has ir_pre.txt rope=4 && has ir_pre.txt attention=2 && has ir_pre.txt rmsnorm=5 && has ir_pre.txt mul=7 && has ir_pre.txt param=21 && ! has ir_pre.txt depth_gain"
check "inspect --ir: 3 + 2 x 31 + 5 nodes, one a line from %0, then the logits output" \
  "[ \$(grep -c '^%' ir_pre.txt) = 70 ] && grep -q '^%69 = matmul' ir_pre.txt && [ \"\$(tail -1 ir_pre.txt)\" = 'output \"logits\" = %69' ]"
"$lrc" inspect llama "${tiny[@]}" --set norm=layerrope --seq 16 --ir >ir_lr.txt
"$lrc" inspect llama "${tiny[@]}" --set norm=layerrope --seq 16 --after fold_gains >ir_lr_nofold.txt
"$lrc" inspect llama "${tiny[@]}" --set norm=layerrope --seq 16 --weights lr.st --after fold_gains >ir_lr_fold.txt
check "inspect --ir: layerrope has depth_gain for 4 sites x 2 layers" "has ir_lr.txt depth_gain=8"
check "inspect --after fold_gains without weights: the gains stay (they are parameters)" "has ir_lr_nofold.txt depth_gain=8"
check "inspect --weights --after fold_gains: no depth_gain, no gain mul left" \
  "! has ir_lr_fold.txt depth_gain && has ir_lr_fold.txt mul=2 && ! grep -q 'layerrope\\|layernorm.weight' ir_lr_fold.txt"
check "inspect --weights: q, k, v, gate, up of both layers and lm_head are folded weights" \
  "[ \$(grep -cE 'param \"fold\\.[0-9]+:model\\.layers\\.[01]\\.(self_attn\\.[qkv]|mlp\\.(gate|up))_proj\\.weight\" folded' ir_lr_fold.txt) = 10 ] && grep -q 'param \"fold\\.[0-9]*:lm_head.weight\" folded' ir_lr_fold.txt"
kernels() { grep -o '^kernels [0-9]*' "$1" | cut -d' ' -f2; }
arena() { grep -o '^arena [0-9]* bytes' "$1" | cut -d' ' -f2; }
"$lrc" inspect llama "${tiny[@]}" --seq 16 --weights pre.st --kernels >k_pre.txt
"$lrc" inspect llama "${tiny[@]}" --set norm=layerrope --seq 16 --weights lr.st --kernels >k_lr.txt
"$lrc" inspect llama "${tiny[@]}" --set norm=layerrope --seq 16 --kernels >k_lr_nofold.txt
echo "kernels: pre $(kernels k_pre.txt), layerrope folded $(kernels k_lr.txt), unfolded $(kernels k_lr_nofold.txt); arena $(arena k_pre.txt) bytes"
check "inspect --kernels: folded layerrope runs pre-norm's kernel count" "[ -n \"\$(kernels k_pre.txt)\" ] && [ \"\$(kernels k_lr.txt)\" = \"\$(kernels k_pre.txt)\" ]"
check "inspect --kernels: unfolded layerrope has 8 more (its depth_gain kernels)" "[ \$(kernels k_lr_nofold.txt) = \$((\$(kernels k_pre.txt) + 8)) ]"
check "inspect --kernels: 'kernel N' lines count the kernels, an arena > 0" \
  "[ \$(grep -c '^kernel [0-9]*' k_pre.txt) = \$(kernels k_pre.txt) ] && [ \"\$(arena k_pre.txt)\" -gt 0 ]"
"$lrc" init llama "${tiny[@]}" --set d_ff=90 -o p90.st >/dev/null
"$lrc" inspect llama "${tiny[@]}" --set d_ff=90 --seq 16 --weights p90.st --target cuda --after pad_hidden >pad_cuda.txt
"$lrc" inspect llama "${tiny[@]}" --set d_ff=90 --seq 16 --weights p90.st --target cpu --after pad_hidden >pad_cpu.txt
check "inspect --target cuda: pad_hidden widens d_ff 90 to 96 (gate, up, down, silu)" \
  "[ \$(grep -cE 'param \"pad\\.[0-9]+:.*mlp\\.(gate|up)_proj\\.weight\" folded : f32\\[96,32\\]' pad_cuda.txt) = 4 ] && [ \$(grep -cE 'mlp\\.down_proj\\.weight\" folded : f32\\[32,96\\]' pad_cuda.txt) = 2 ] && [ \$(grep -c 'silu .*f32\\[1,16,96\\]' pad_cuda.txt) = 2 ]"
check "inspect --target cpu: nothing padded" "! grep -q 'pad\\.\\|96\\]' pad_cpu.txt && [ \$(grep -c 'silu .*f32\\[1,16,90\\]' pad_cpu.txt) = 2 ]"
# every pass of the pipeline is one --after: autodiff shows the training
# graph (the loss and one gradient per parameter, 2 x 9 + 3 of them), kv_cache
# the decoder of --ctx (two caches a layer at the input "pos")
"$lrc" inspect llama "${tiny[@]}" --seq 16 --after autodiff >ad.txt
check "inspect --after autodiff: outputs 'loss' then the 21 parameters' gradients, an input 'labels'" \
  "[ \"\$(grep '^output' ad.txt | head -1 | cut -d' ' -f2)\" = '\"loss\"' ] && [ \$(grep -c '^output' ad.txt) = 22 ] && grep -q 'input \"labels\" : i32\\[1,16\\]' ad.txt"
"$lrc" inspect llama "${tiny[@]}" --ctx 16 --after kv_cache >kv.txt
check "inspect --ctx 16 --after kv_cache: 2 kv_attention, 4 caches of 16 positions, input pos" \
  "[ \$(grep -c ' = kv_attention ' kv.txt) = 2 ] && [ \$(grep -c 'state \"cache\\.[01]\\.[kv]\" : f32\\[1,16,2,16\\]' kv.txt) = 4 ] && grep -q 'input \"pos\" : i32\\[1\\]' kv.txt"
"$lrc" inspect llama "${tiny[@]}" --after kv_cache >kv_noctx.txt 2>kv_noctx.err; kv_rc=$?
check "inspect --after kv_cache without --ctx: a usage error (status 2) that names --ctx" \
  "[ $kv_rc = 2 ] && grep -q 'needs --ctx' kv_noctx.err && [ ! -s kv_noctx.txt ]"
"$lrc" inspect llama "${tiny[@]}" --after nosuchpass >/dev/null 2>np.err
passes=$(sed -n 's/.*(passes: \(.*\))$/\1/p' np.err | tr -d ',')
n_ok=0
for p in $passes; do
  ctx=(); [ "$p" = kv_cache ] && ctx=(--ctx 8); [ "$p" = last_rows ] && ctx=(--logits last)
  "$lrc" inspect llama "${tiny[@]}" --seq 8 "${ctx[@]}" --after "$p" >after_$p.txt 2>/dev/null && [ -s after_$p.txt ] && n_ok=$((n_ok + 1))
done
check "inspect --after: each of the 9 passes the error lists prints (kv_cache .. plan_memory)" \
  "[ \"\$(echo $passes | wc -w)\" = 9 ] && [ $n_ok = 9 ] && grep -q '^kernels [0-9]' after_fuse.txt && ! grep -q '^kernels' after_dce.txt"

# ---- --repeat: the outputs of N timed runs are those of one run, and the timing names N
st make tok.st '{"tokens": ["I32", [2, 16], [72,101,108,108,111,32,119,111,114,108,100,33,32,84,104,101,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]]}'
F=(forward llama "${tiny[@]}" --weights pre.st --input tok.st --target cpu --threads 2)
"$lrc" "${F[@]}" -o f_once.st >/dev/null
"$lrc" "${F[@]}" --repeat 1 -o f_r1.st >r1.txt
"$lrc" "${F[@]}" --repeat 4 -o f_r4.st >r4.txt
check "forward --repeat 4: logits byte-identical to --repeat 1's and to a run without --repeat" \
  "[ -s f_once.st ] && cmp -s f_r1.st f_r4.st && cmp -s f_once.st f_r4.st"
check "forward --repeat: the timing line reports the runs" \
  "grep -q '^forward: median [0-9.]* ms over 1 runs' r1.txt && grep -q '^forward: median [0-9.]* ms over 4 runs (min [0-9.]*, max [0-9.]*), [0-9]* tokens/s, 2 threads' r4.txt"
"$lrc" forward llama "${tiny[@]}" --weights pre.st --input tok.st --target ref -o f_ref.st >/dev/null
check "forward: cpu logits within 1e-5 of ref" "'$compare' f_r4.st f_ref.st logits 1e-5 >/dev/null"
# the ref target times its runs too (it ignored --repeat before)
"$lrc" forward llama "${tiny[@]}" --weights pre.st --input tok.st --target ref --repeat 2 -o f_ref2.st >ref2.txt
check "forward --target ref --repeat 2: the logits of one run, the timing line reports 2 runs" \
  "cmp -s f_ref.st f_ref2.st && grep -q '^forward: median [0-9.]* ms over 2 runs (min [0-9.]*, max [0-9.]*), [0-9]* tokens/s, 1 threads' ref2.txt"
"$lrc" profile llama "${tiny[@]}" --weights pre.st --input tok.st --threads 2 --repeat 3 -o trace.json >prof.txt
per_run=$(sed -n 's/^profile of llama: 3 runs, 2 threads, \([0-9]*\) launches per run$/\1/p' prof.txt)
calls=$(awk '/^function/ { on = 1; next } on && NF == 0 { on = 0 } on { s += $2; if ($2 % 3) bad = 1 } END { print bad ? -1 : s }' prof.txt)
events=$(grep -o '"ph" *: *"X"' trace.json | wc -l)
echo "profile --repeat 3: $per_run launches per run, $calls calls, $events trace events"
check "profile --repeat 3: one launch per kernel a run (inspect --kernels' count)" "[ \"$per_run\" = \"\$(kernels k_pre.txt)\" ]"
check "profile --repeat 3: every function called a multiple of 3 times, 3 x launches in all" "[ \"$calls\" = \$((3 * ${per_run:-0})) ]"
check "profile --repeat 3: the trace holds 3 x launches events" \
  "[ \"$events\" = \$((3 * ${per_run:-0})) ] && grep -q '^trace trace.json ($events events)' prof.txt"
st make tok8.st '{"tokens": ["I32", [1, 8], [72,101,108,108,111,32,119,111]]}'
B=(backward llama "${tiny[@]}" --weights pre.st --input tok8.st --target cuda --precision f32)
LD_LIBRARY_PATH=$cuemu LRC_CUEMU_DIR=$cuemu/modules LRC_NVRTC_CACHE=off "$lrc" "${B[@]}" -o g_once.st >/dev/null 2>&1
LD_LIBRARY_PATH=$cuemu LRC_CUEMU_DIR=$cuemu/modules LRC_NVRTC_CACHE=off "$lrc" "${B[@]}" --repeat 2 -o g_r2.st >br2.txt 2>&1
check "backward --target cuda --repeat 2 (emulated): gradients byte-identical to one run" "[ -s g_once.st ] && cmp -s g_once.st g_r2.st"
check "backward --repeat 2: the timing line reports 2 runs" "grep -q '^backward: median [0-9.]* ms over 2 runs' br2.txt"
"$lrc" backward llama "${tiny[@]}" --weights pre.st --input tok8.st --target ref -o g_ref.st >/dev/null
check "backward cuda (emulated, f32) within 1e-4 of ref" "'$compare' g_r2.st g_ref.st '*' 1e-4 >/dev/null"
"$lrc" backward llama "${tiny[@]}" --weights pre.st --input tok8.st --target cpu --repeat 2 -o g_cpu.st >/dev/null 2>brc.err
rc=$?
check "backward --repeat on cpu: exit 1, says it times cuda, no output" \
  "[ $rc = 1 ] && grep -q '^lrc: --repeat applies to --target cuda' brc.err && [ ! -e g_cpu.st ]"

# ---- F16 and BF16 weights: the same logits as an F32 file of the same rounded values
st bf16 pre.st pre_bf16.st
st widen pre_bf16.st pre_bf16_f32.st
py f16 pre.st pre_f16.st
py widen pre_f16.st pre_f16_f32.st
cp f_once.st lg_f32_cpu.st # the F32 weights' logits on both targets, from above
cp f_ref.st lg_f32_ref.st
check "the converted files hold BF16 and F16 tensors" \
  "[ \"\$(st dtypes pre_bf16.st)\" = 'BF16 21' ] && [ \"\$(st dtypes pre_f16.st)\" = 'F16 21' ] && [ \"\$(st dtypes pre_f16_f32.st)\" = 'F32 21' ]"
for dt in bf16 f16; do
  for target in ref cpu; do
    W=(forward llama "${tiny[@]}" --input tok.st --target $target --threads 2)
    "$lrc" "${W[@]}" --weights pre_$dt.st -o lg_$dt.st >/dev/null
    "$lrc" "${W[@]}" --weights pre_${dt}_f32.st -o lg_${dt}_f32.st >/dev/null
    check "$dt weights on $target: logits equal those of the F32 file of the same values" "[ -s lg_$dt.st ] && cmp -s lg_$dt.st lg_${dt}_f32.st"
    # bf16 keeps 8 bits of mantissa, f16 11: the logits move by about 2^-9 and 2^-12 of their norm
    lim=$([ $dt = bf16 ] && echo 2e-2 || echo 3e-3)
    check "$dt weights on $target: logits within $lim of the unrounded F32 weights', and not equal" \
      "'$compare' lg_$dt.st lg_f32_$target.st logits $lim >/dev/null && ! '$compare' lg_$dt.st lg_f32_$target.st logits 1e-7 >/dev/null"
  done
done

# ---- generate, on a briefly trained model (so the argmax is not a near-tie)
# (-o in folders that do not exist yet: made as mkdir -p makes them)
"$lrc" train llama "${tiny[@]}" --steps 12 --lr 1e-2 --warmup 0 --batch 4 --seq 32 --eval-every 12 --data text.txt --threads 2 -o runs/a/run >/dev/null
check "train -o runs/a/run makes the folders above the run" "[ -s runs/a/run/model.safetensors ]"
Wt=runs/a/run/model.safetensors
prompt="In the beginning God"
G=(generate llama "${tiny[@]}" --weights "$Wt" --prompt "$prompt" -n 40 --threads 2)
"$lrc" "${G[@]}" --temperature 0 >greedy1.txt 2>/dev/null
"$lrc" "${G[@]}" --temperature 0 --seed 9 >greedy2.txt 2>gen.err
check "generate --temperature 0: the prompt, 40 bytes and a newline; the same with another seed" \
  "[ \"\$(head -c ${#prompt} greedy1.txt)\" = '$prompt' ] && [ \$(wc -c <greedy1.txt) = $((${#prompt} + 41)) ] && cmp -s greedy1.txt greedy2.txt"
check "generate: stderr reports 40 new tokens" "grep -q '^generate: 40 new tokens' gen.err"
head -c $((${#prompt} + 40)) greedy1.txt >greedy_text.txt
py tokens greedy_tok.st greedy_text.txt
"$lrc" forward llama "${tiny[@]}" --weights "$Wt" --input greedy_tok.st -o greedy_lg.st >/dev/null
check "generate --temperature 0: every byte is forward's argmax after the text before it" "py greedy greedy_lg.st ${#prompt} greedy_text.txt"
"$lrc" "${G[@]}" --temperature 5 --top-k 1 --seed 3 >topk1.txt 2>/dev/null
check "generate --top-k 1 at temperature 5 is greedy" "cmp -s topk1.txt greedy1.txt"
for s in 1 2 3; do "$lrc" "${G[@]}" --temperature 1 --top-k 0 --seed $s >seed$s.txt 2>/dev/null; done
"$lrc" "${G[@]}" --temperature 1 --top-k 0 --seed 1 >seed1b.txt 2>/dev/null
check "generate --seed 1 at temperature 1: the same text twice" "[ -s seed1.txt ] && cmp -s seed1.txt seed1b.txt"
check "generate: seeds 1, 2, 3 give three different texts, none greedy" \
  "! cmp -s seed1.txt seed2.txt && ! cmp -s seed2.txt seed3.txt && ! cmp -s seed1.txt seed3.txt && ! cmp -s seed1.txt greedy1.txt"

# ---- eval of a language model: the loss on eval's windows, from forward's logits
"$lrc" eval llama "${tiny[@]}" --weights "$Wt" --data text.txt --batch 2 --seq 16 --steps 3 --seed 7 --threads 2 >eval.txt
py windows text.txt 16 7 2 3 win.st
"$lrc" forward llama "${tiny[@]}" --weights "$Wt" --input win.st -o win_lg.st >/dev/null
check "eval: the loss of forward's logits on the 6 windows eval draws" "py evalloss win_lg.st win.st.labels eval.txt"
check "eval: it says what it averaged" "grep -q '^validation loss [0-9.]* nats/byte (3 batches of 2x16)$' eval.txt"
"$lrc" eval llama "${tiny[@]}" --weights pre.st --data text.txt --batch 2 --seq 16 --steps 3 --seed 7 --threads 2 >eval0.txt
l0=$(grep -o 'loss [0-9.]*' eval0.txt | cut -d' ' -f2) l1=$(grep -o 'loss [0-9.]*' eval.txt | cut -d' ' -f2)
echo "eval: untrained $l0 (ln 256 = 5.5452), trained 12 steps $l1"
check "eval: untrained within 0.1 of ln 256; trained over 1 nat lower" "awk 'BEGIN { exit !($l0 > 5.4452 && $l0 < 5.6452 && $l1 < $l0 - 1) }'"

# ---- diagnose: per-iteration rows, and the Jacobian against the rate its iterations converge at
"$lrc" init parcae "${tiny[@]}" -o par.st >/dev/null
D=(diagnose parcae "${tiny[@]}" --weights par.st --prompt "In the b")
"$lrc" "${D[@]}" --set T=3 >diag3.txt
"$lrc" "${D[@]}" --set T=6 >diag6.txt
"$lrc" "${D[@]}" --set T=6 --steps 4 >diag_s4.txt
"$lrc" "${D[@]}" --set T=6 --steps 8 >diag_s8.txt
check "diagnose names the model and the state of its loop" "grep -q '^models/parcae.lua, prompt of 8 bytes, state \\[1, 8, 32\\], in f64$' diag6.txt"
check "diagnose: converged with the default steps; not with --steps 4 and 8" \
  "grep -q '^fixed point: converged after [0-9]* iterations' diag6.txt && grep -q '^fixed point: not converged after 4 iterations' diag_s4.txt && grep -q '^fixed point: not converged after 8 iterations' diag_s8.txt"
check "diagnose: T rows, T=3's rows those of T=6, rho <= ||J||, residuals and state norms shrink at rate rho" \
  "py diagnose diag3.txt diag6.txt diag_s4.txt diag_s8.txt 4 8"
# a model without a loop: its residual stream, a row per layer (the numbers
# themselves: ctest diagnose_residual against llama_ref)
"$lrc" diagnose llama "${tiny[@]}" --weights pre.st --input tok.st >diag_llama.txt 2>diag_llama.err
rc=$?
check "diagnose of a model without a loop: the residual stream, a row per layer" \
  "[ $rc = 0 ] && grep -q '^residual stream of llama over 2 sequences of 16 positions' diag_llama.txt && [ \$(grep -c '^ *[0-9] ' diag_llama.txt) = 2 ]"

# ---- gemm-bench: the product checked against f64, at sizes that hit every tile tail
for s in "8 8 8" "37 53 29" "1 300 7" "129 65 300"; do
  set -- $s
  "$lrc" gemm-bench --m $1 --n $2 --k $3 --threads 2 --repeat 2 >gb.txt
  rc=$?
  check "gemm-bench $s: GFLOP/s and a passing check of the product" \
    "[ $rc = 0 ] && grep -qE '^gemm $1 $2 $3: median [0-9.]+ ms, [0-9.]+ GFLOP/s' gb.txt && grep -qE '^check: $(($1 * $2)) entries against an f64 product, largest error [0-9.e-]+ of the f32 summation bound: ok$' gb.txt"
done
for op in matmul_nn matmul_tn; do # the backward's forms, each tile tail
  for s in "8 8 8" "37 53 29" "1 300 7" "129 65 300"; do
    set -- $s
    "$lrc" gemm-bench --op $op --m $1 --n $2 --k $3 --threads 2 --repeat 2 >gb.txt
    rc=$?
    check "gemm-bench --op $op $s: GFLOP/s and a passing check of the product" \
      "[ $rc = 0 ] && grep -qE '^$op $1 $2 $3: median [0-9.]+ ms, [0-9.]+ GFLOP/s' gb.txt && grep -qE '^check: $(($1 * $2)) entries .*: ok$' gb.txt"
  done
done
"$lrc" gemm-bench --m 300 --n 300 --k 64 --threads 2 --repeat 1 >gb.txt
check "gemm-bench 300x300: 4096 sampled entries plus the last row and column" "grep -q '^check: 4696 entries .*: ok$' gb.txt"
for op in matmul matmul_nn; do # bf16 panels (W rounded first: the check stays f32's), each tile tail
  for s in "8 8 8" "37 53 29" "1 300 7" "129 65 300"; do
    set -- $s
    "$lrc" gemm-bench --op $op --weights-dtype bf16 --m $1 --n $2 --k $3 --threads 2 --repeat 2 >gb.txt
    rc=$?
    check "gemm-bench --op $op --weights-dtype bf16 $s: a passing check of the product" \
      "[ $rc = 0 ] && grep -qE '^(gemm|$op) $1 $2 $3: median [0-9.]+ ms, [0-9.]+ GFLOP/s .*bf16 weights' gb.txt && grep -qE '^check: $(($1 * $2)) entries .*: ok$' gb.txt"
  done
done
"$lrc" gemm-bench --op matmul_tn --weights-dtype bf16 --m 8 --n 8 --k 8 >gb.txt 2>err.txt
rc=$?
check "gemm-bench --op matmul_tn --weights-dtype bf16: exit 2, one line ($(cat err.txt))" "[ $rc = 2 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q 'needs a weight' err.txt"

# ---- devices: this CPU's vectors, NVRTC from the toolkit, the emulated GPU
"$lrc" devices >dev.txt
flags=$(grep -m1 '^flags' /proc/cpuinfo)
if [[ " $flags " == *" avx512f "* && " $flags " == *" avx512vl "* ]]; then want="16-float vectors, GEMM tile 12x32"; else want="8-float vectors, GEMM tile 6x16"; fi
check "devices: ref and cpu available, cpu with this CPU's vectors ($want)" \
  "grep -q '^target ref: available' dev.txt && grep -q '^target cpu: available (x86_64[^,]*, $want)$' dev.txt"
# the toolkit's own answer, through ctypes
nvrtc=$(/usr/bin/python3 -c 'import ctypes
a, b = ctypes.c_int(), ctypes.c_int()
ctypes.CDLL("/usr/local/cuda/lib64/libnvrtc.so").nvrtcVersion(ctypes.byref(a), ctypes.byref(b))
print("%d.%d" % (a.value, b.value))' 2>/dev/null)
if [ -n "$nvrtc" ]; then
  check "devices: cuda compile available with the toolkit's NVRTC $nvrtc" "grep -q '^target cuda, compile: available (NVRTC $nvrtc:' dev.txt"
else
  check "devices: no NVRTC in /usr/local/cuda, cuda compile not available" "grep -q '^target cuda, compile: not available' dev.txt"
fi
if ls /dev/nvidia0 >/dev/null 2>&1; then
  check "devices: a GPU, cuda run available" "grep -q '^target cuda, run: available' dev.txt"
else
  check "devices: no GPU here, cuda run not available" "grep -q '^target cuda, run: not available: ' dev.txt"
fi
LD_LIBRARY_PATH=$cuemu "$lrc" devices >dev_emu.txt
check "devices with the emulated driver: cuda run available, sm_90, 1 device" \
  "grep -q '^target cuda, run: available: cuemu .*(sm_90, [0-9]* GiB; 1 device;' dev_emu.txt"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
