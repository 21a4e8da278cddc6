#!/usr/bin/python3
"""lrc diagnose's residual stream against llama_ref.forward with a hook on half_step, and
vit_ref.forward's streams.

    /usr/bin/python3 tests/reference/diagnose_check.py LRC MODEL

For each norm placement, on lrc init's weights (small, seed 3) with every gain and LayerRoPE
scalar moved by a random 30%, and 3 sequences of 33 tokens (for ViT, pre and layerrope at
tiny, 3 images of 8 x 8; the class token is position 0)
tokens: the variance of the stream after each layer over positions 1.. of every sequence
and every feature, and the root mean square of each read and write multiplier, from
`lrc diagnose --input ... -o J.json` and from the reference (both in float64), within
1e-9 relative. Exit status 1 on any difference.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_ref  # noqa: E402
import safetensors_io  # noqa: E402


def reference(params, tokens, cfg):
    """Per layer: the stream's variance and the multipliers' RMS, as lrc diagnose defines them."""
    streams = {}
    original = llama_ref.half_step

    def hooked(h, block, layer, which, p, c):
        out = original(h, block, layer, which, p, c)
        if which == 1:
            streams[layer] = out
        return out
    llama_ref.half_step = hooked
    try:
        llama_ref.forward(params, tokens, cfg)
    finally:
        llama_ref.half_step = original
    p = {k: v.to(torch.float64) for k, v in params.items()}
    rows = []
    for l in range(cfg.n_layers):
        x = streams[l][:, 1:, :]
        row = {"layer": l, "variance": float(((x - x.mean()) ** 2).mean())}
        pre = "model.layers.%d." % l
        for which, kind in enumerate(("attn", "mlp")):
            read = write = None
            if cfg.norm in ("pre", "lns", "peri"):
                read = p[pre + llama_ref._READ_NORMS[cfg.norm][which] + ".weight"]
                if cfg.norm == "lns":
                    read = read / math.sqrt(l + 1.0)
            if cfg.norm == "peri":
                write = p[pre + llama_ref._WRITE_NORMS["peri"][which] + ".weight"]
            if cfg.norm.startswith("layerrope"):
                read = llama_ref.layerrope_gain(p, "in_" + kind, l, cfg)
                write = llama_ref.layerrope_gain(p, "out_" + kind, l, cfg)
            for site, g in (("read." + kind, read), ("write." + kind, write)):
                if g is not None:
                    row[site] = float(g.pow(2).mean().sqrt())
        rows.append(row)
    return rows


def vit_reference(params, images, cfg):
    """The same for a ViT, from vit_ref.forward's streams (position 0, the class token, left out)."""
    import vit_ref
    streams = {}
    vit_ref.forward(params, images, cfg, streams)
    p = {k: v.to(torch.float64) for k, v in params.items()}
    rows = []
    for l in range(cfg.n_layers):
        x = streams[l][:, 1:, :]
        row = {"layer": l, "variance": float(((x - x.mean()) ** 2).mean())}
        pre = "vit.encoder.layer.%d." % l
        for kind, name in (("attn", "layernorm_before"), ("mlp", "layernorm_after")):
            if cfg.norm == "layerrope":
                row["read." + kind] = float(vit_ref.gain(p, "in_" + kind, l, cfg).pow(2).mean().sqrt())
                row["write." + kind] = float(vit_ref.gain(p, "out_" + kind, l, cfg).pow(2).mean().sqrt())
            else:
                row["read." + kind] = float(p[pre + name + ".weight"].pow(2).mean().sqrt())
        rows.append(row)
    return rows


def perturbed(path):
    """lrc init's file with every vector and scalar parameter (gains, biases, LayerRoPE's
    vectors and slopes) moved by a random 30%, as training moves them; written back."""
    params, _ = safetensors_io.load(path)
    g = torch.Generator().manual_seed(7)
    for k, v in params.items():
        if v.dim() <= 1:
            params[k] = (v * (1 + 0.3 * torch.randn(v.shape, generator=g, dtype=torch.float64))).to(torch.float32)
    safetensors_io.save(path, params)
    return params


def compare(what, got, want):
    """0 when every number of lrc's rows is the reference's within 1e-9, else 1 (printed)."""
    worst, keys, failed = 0.0, set(), 0
    for g, r in zip(got, want):
        if set(g) != set(r):
            print("FAIL %s layer %d: lrc reports %s, the reference %s" % (what, r["layer"], sorted(g), sorted(r)))
            failed = 1
        for k in r:
            if k != "layer":
                keys.add(k)
                worst = max(worst, abs(g.get(k, float("nan")) - r[k]) / abs(r[k]))
    if len(got) != len(want) or not worst <= 1e-9:
        print("FAIL %s: %d layers against %d, worst relative difference %.3e" % (what, len(got), len(want), worst))
        return 1
    print("ok   %-20s %d layers (%s): worst relative difference %.3e" % (what, len(got), ", ".join(sorted(keys)), worst))
    return failed


def check_vit(lrc, tmp):
    import vit_ref
    failed = 0
    images = torch.sin(0.37 * torch.arange(3 * 64, dtype=torch.float64)).reshape(3, 1, 8, 8).to(torch.float32)
    safetensors_io.save(os.path.join(tmp, "img.st"), {"images": images})
    for norm in ("pre", "layerrope"):
        w, js = os.path.join(tmp, "wv.st"), os.path.join(tmp, "dv.json")
        common = ["vit", "--preset", "tiny", "--set", "norm=" + norm]
        subprocess.run([lrc, "init"] + common + ["--seed", "3", "-o", w], check=True, stdout=subprocess.DEVNULL)
        params = perturbed(w)
        subprocess.run([lrc, "diagnose"] + common + ["--weights", w, "--input", os.path.join(tmp, "img.st"), "-o", js],
                       check=True, stdout=subprocess.DEVNULL)
        # models/vit.lua's tiny preset (lrc inspect vit --preset tiny)
        cfg = vit_ref.Config(image_size=8, channels=1, patch=4, n_classes=10, d_model=16, n_layers=2, n_heads=2, d_ff=32,
                             norm=norm)
        failed |= compare("vit " + norm, json.load(open(js))["layers"], vit_reference(params, images, cfg))
    return failed


def main():
    lrc, model = sys.argv[1], sys.argv[2]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        failed |= check_vit(lrc, tmp)
        B, T = 3, 33
        tokens = torch.tensor([[(11 * (b * T + t) + 5) % 256 for t in range(T)] for b in range(B)], dtype=torch.int32)
        safetensors_io.save(os.path.join(tmp, "in.st"), {"tokens": tokens})
        for norm in ("pre", "lns", "peri", "post", "layerrope", "layerrope_peri"):
            w, js = os.path.join(tmp, "w.st"), os.path.join(tmp, "d.json")
            common = [model, "--preset", "small", "--set", "norm=" + norm]
            subprocess.run([lrc, "init"] + common + ["--seed", "3", "-o", w], check=True, stdout=subprocess.DEVNULL)
            params = perturbed(w)
            subprocess.run([lrc, "diagnose"] + common + ["--weights", w, "--input", os.path.join(tmp, "in.st"), "-o", js],
                           check=True, stdout=subprocess.DEVNULL)
            # models/llama.lua's small preset
            cfg = llama_ref.Config(d_model=128, n_layers=4, n_heads=4, d_ff=352, vocab=256, norm=norm)
            failed |= compare("llama " + norm, json.load(open(js))["layers"], reference(params, tokens.long(), cfg))
    return failed


if __name__ == "__main__":
    sys.exit(main())
