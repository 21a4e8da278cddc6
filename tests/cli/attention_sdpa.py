#!/usr/bin/python3
# attention_sdpa.py LRC — attention's general form (attention_sdpa.lua, its
# inputs given at run time) through `lrc forward` on ref and cpu against
# torch's scaled dot-product attention (torch 1.13's
# torch.nn.functional._scaled_dot_product_attention, an additive float mask;
# GQA by repeating k and v): Tq < Tk and Tq > Tk, causal (top-left: query i
# sees keys j <= i, as is_causal), biases [B,1,Tq,Tk] and [1,H,Tq,Tk], the
# default scale 1/sqrt(Dqk) and a given one, a padding mask of -inf. A
# query row the mask hides whole is NaN in torch and zeros in lrc.
import os, struct, subprocess, sys, tempfile
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import st  # noqa: E402

lrc = sys.argv[1]
model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_sdpa.lua")
tmp = tempfile.mkdtemp()
failed = 0
weights = os.path.join(tmp, "w.st")  # the model has no parameters: an empty file
subprocess.run([lrc, "init", model, "-o", weights], check=True, capture_output=True)


def raw(t):
    return t.contiguous().numpy().astype("float32").tobytes()


def run(name, tq, tk, bias_shape, causal, scale=0.0, pad=False):
    global failed
    g = torch.Generator().manual_seed(len(name))
    B, H, Hkv = 2, 4, 2
    q = torch.rand(B, tq, H, 8, generator=g) * 2 - 1
    k = torch.rand(B, tk, Hkv, 8, generator=g) * 2 - 1
    v = torch.rand(B, tk, Hkv, 6, generator=g) * 2 - 1
    ins = {"tokens": ["I32", [B, tq], struct.pack("<%di" % (B * tq), *range(B * tq))],
           "q": ["F32", list(q.shape), raw(q)], "k": ["F32", list(k.shape), raw(k)], "v": ["F32", list(v.shape), raw(v)]}
    sets = ["--set", "tq=%d" % tq, "--set", "tk=%d" % tk, "--set", "causal=%s" % ("true" if causal else "false")]
    mask = None
    if bias_shape:
        bias = torch.rand(*bias_shape, generator=g) * 2 - 1
        if pad:  # batch b hides its last b + 1 keys; the last batch's last row sees none
            for b in range(B):
                bias[b, :, :, tk - 1 - b:] = float("-inf")
            bias[B - 1, :, tq - 1, :] = float("-inf")
        ins["bias"] = ["F32", list(bias.shape), raw(bias)]
        sets += ["--set", "bias_b=%d" % bias_shape[0], "--set", "bias_h=%d" % bias_shape[1]]
        mask = bias
    else:
        sets += ["--set", "with_bias=false"]
    if scale:
        sets += ["--set", "scale=%r" % scale]
    inp = os.path.join(tmp, name + ".st")
    st.pack(inp, ins)
    # torch: [B, H, T, D], k and v repeated over each group of query heads
    qt, kt, vt = (x.permute(0, 2, 1, 3) for x in (q, k, v))
    kt, vt = kt.repeat_interleave(H // Hkv, 1), vt.repeat_interleave(H // Hkv, 1)
    if scale:
        qt = qt * (scale * 8 ** 0.5)  # torch 1.13 scales by 1/sqrt(E) only
    if causal and mask is not None:
        mask = mask + torch.full((tq, tk), float("-inf")).triu(1)
    want = F._scaled_dot_product_attention(qt, kt, vt, mask, 0.0, False, causal and mask is None)[0]
    want = want.permute(0, 2, 1, 3).reshape(B, tq, 24)
    empty = torch.isnan(want)
    if pad and not bool(empty[B - 1, tq - 1].all()):
        print("FAIL %s: torch's row that sees no key is not NaN" % name)
        failed += 1
    want = torch.where(empty, torch.zeros(()), want)  # lrc: zeros there
    for target in ("ref", "cpu"):
        out = os.path.join(tmp, "%s_%s.st" % (name, target))
        r = subprocess.run([lrc, "forward", model, *sets, "--weights", weights, "--input", inp, "-o", out, "--target", target, "--threads", "2"],
                           capture_output=True, text=True)
        if r.returncode:
            print("FAIL %s on %s: %s" % (name, target, r.stderr.strip()))
            failed += 1
            continue
        dt, shape, data = st.tensors(out)["logits"]
        got = torch.tensor(list(struct.unpack("<%df" % (len(data) // 4), data))).reshape(shape)
        err = float((got - want).abs().max()) / max(float(want.abs().max()), 1e-30)
        ok = err <= 1e-5
        failed += not ok
        print("%s %s on %s: max error %.2e of the largest value" % ("ok  " if ok else "FAIL", name, target, err))


run("cross_mask", 5, 7, (2, 1, 5, 7), False, pad=True)
run("cross_mask_causal", 5, 7, (2, 1, 5, 7), True, pad=True)
run("bias_heads_causal", 5, 7, (1, 4, 5, 7), True)
run("causal_longer_q", 7, 5, None, True)
run("bias_scale", 7, 5, (2, 4, 7, 5), False, scale=0.3)
run("plain", 6, 6, None, False)
sys.exit(1 if failed else 0)
