#!/usr/bin/python3
"""lrc analyze's numbers against numpy on a synthetic checkpoint.

    /usr/bin/python3 tests/reference/analyze_check.py LRC

The checkpoint: per-layer gains of two sites (input_layernorm, post_attention_layernorm; 7
layers of 24, growing and rotating with depth plus noise) and LayerRoPE's four sites with
random slopes. numpy computes the percentiles (np.percentile), the cosines, a classical MDS
(np.linalg.eigh of the double-centred squared distances of the unit gains; each axis compared
up to its sign), the arc around the centroid, and LayerRoPE's e^r, theta and gain ratio; lrc's
JSON must agree within 1e-9. Exit status 1 on any difference.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402

L, D = 7, 24


def checkpoint(rng):
    t = {}
    base = 1 + 0.1 * rng.standard_normal(D)
    for site in ("input_layernorm", "post_attention_layernorm"):
        for l in range(L):
            ang = 0.25 * l
            g = base * (1 + 0.15 * l) + 0.05 * rng.standard_normal(D)
            g[0], g[1] = g[0] * math.cos(ang) - g[1] * math.sin(ang), g[0] * math.sin(ang) + g[1] * math.cos(ang)
            g[13] *= 0.01  # a deactivated dimension (Appendix C)
            g[20] = 1.5 - 0.1 * l  # against its head's trend
            t["model.layers.%d.%s.weight" % (l, site)] = g
    for site in ("in_attn", "out_attn", "in_mlp", "out_mlp"):
        t["model.layerrope.%s_gamma" % site] = 1 + 0.1 * rng.standard_normal(D)
        for k in ("alpha", "beta", "alpha_rot", "beta_rot"):
            t["model.layerrope.%s_%s" % (site, k)] = np.array([rng.uniform(-1, 1)])
    t["model.embed_tokens.weight"] = rng.standard_normal((5, D))  # not a norm weight: ignored
    return {k: torch.tensor(v, dtype=torch.float32) for k, v in t.items()}


def expected_site(gs):
    """numpy's numbers for one site: gs [L, D] (the f32 values, in f64)."""
    rows = []
    unit = gs / np.linalg.norm(gs, axis=1, keepdims=True)
    d2 = 2 - 2 * unit @ unit.T
    J = np.eye(L) - 1.0 / L
    vals, vecs = np.linalg.eigh(-0.5 * J @ d2 @ J)
    order = np.argsort(vals)[::-1][:2]
    xy = vecs[:, order] * np.sqrt(np.maximum(vals[order], 0))
    c = xy.mean(axis=0)
    ang = np.arctan2(xy[:, 1] - c[1], xy[:, 0] - c[0])
    turns = (np.diff(ang) + math.pi) % (2 * math.pi) - math.pi
    for l in range(L):
        r = {"layer": l, "mean": gs[l].mean(), "cos_first": unit[l] @ unit[0], "mds_x": xy[l, 0], "mds_y": xy[l, 1]}
        r["p50"], r["p90"], r["p99"] = np.percentile(gs[l], [50, 90, 99])
        if l:
            r["cos_prev"] = unit[l] @ unit[l - 1]
        rows.append(r)
    return rows, abs(turns.sum()) * 180 / math.pi


def expected_trajectory(gs, head, tol):
    """Appendix C's split by numpy: per head the mean trajectory m; a dimension is deactivated
    when |x| < 0.1 |m|, follows when x less its least-squares multiple of m keeps at most tol of |x|"""
    follow, dead, dev = 0, 0, []
    for h0 in range(0, gs.shape[1], head):
        m = gs[:, h0:h0 + head].mean(axis=1)
        for j in range(h0, h0 + head):
            x = gs[:, j]
            if np.linalg.norm(x) < 0.1 * np.linalg.norm(m):
                dead += 1
                continue
            r = np.linalg.norm(x - (x @ m) / (m @ m) * m) / np.linalg.norm(x)
            if r <= tol:
                follow += 1
            else:
                dev.append((r, j))
    dev.sort(reverse=True)
    return {"fraction": follow / gs.shape[1], "follow": follow, "deactivated": dead, "deviating": len(dev)}, dev[:8]


def check_hf_logits(lrc, tmp):
    """--fit-layerrope of a Hugging Face directory: the logits it reports before and after the fit
    against lrc forward of the directory and of the written file with --set norm=layerrope (f32
    on the reference backend): every row's top-1 tokens, and the largest difference within 1e-4"""
    hf = os.path.join(HERE, "..", "fixtures", "hf", "llama_mha")
    fit, js = os.path.join(tmp, "hf_fit.st"), os.path.join(tmp, "hf_fit.json")
    subprocess.run([lrc, "analyze", hf, "--fit-layerrope", fit, "-o", js], check=True, stdout=subprocess.DEVNULL)
    got = json.load(open(js))["fit_logits"]
    rows = got["positions"]
    tok = os.path.join(tmp, "hf_tok.st")
    safetensors_io.save(tok, {"tokens": torch.tensor([[r["token"] for r in rows]], dtype=torch.int32)})
    logits = []
    for extra in ([], ["--set", "norm=layerrope", "--weights", fit]):
        out = os.path.join(tmp, "hf_out.st")
        subprocess.run([lrc, "forward", hf, *extra, "--input", tok, "-o", out, "--target", "ref"], check=True, stdout=subprocess.DEVNULL)
        logits.append(safetensors_io.load(out)[0]["logits"][0].double())
    failed = 0
    for t, r in enumerate(rows):
        top = (int(logits[0][t].argmax()), int(logits[1][t].argmax()))
        diff = float((logits[1][t] - logits[0][t]).abs().max())
        if top != (r["top1_before"], r["top1_after"]) or abs(diff - r["max_abs_diff"]) > 1e-4:
            print("FAIL --fit-layerrope logits at position %d: lrc analyze top-1 %d, %d, max |diff| %.6g; lrc forward %d, %d, %.6g"
                  % (t, r["top1_before"], r["top1_after"], r["max_abs_diff"], *top, diff))
            failed = 1
    agree = sum(int(logits[0][t].argmax()) == int(logits[1][t].argmax()) for t in range(len(rows)))
    if agree != got["top1_agree"]:
        print("FAIL --fit-layerrope: top-1 agreement %d, lrc forward %d" % (got["top1_agree"], agree))
        failed = 1
    print("%s --fit-layerrope of %s: logits before and after (top-1 agree at %d of %d, relative RMS %.3e) as lrc forward's"
          % ("FAIL" if failed else "ok  ", "llama_mha", got["top1_agree"], len(rows), got["relative_rms"]))
    return failed


def check_fit(lrc, tmp):
    """--fit-layerrope on a Pre-Norm checkpoint whose gains are LayerRoPE's form (known gamma and
    slopes) plus 0.1% noise: the fit's relative error at the noise's level, the written file's
    gains (llama_ref.depth_gain of its tensors) within 1% of the per-layer ones, and the file
    running as a LayerRoPE model (lrc forward --set norm=layerrope)."""
    import llama_ref
    w, fit, js = os.path.join(tmp, "pre.st"), os.path.join(tmp, "fit.st"), os.path.join(tmp, "fit.json")
    subprocess.run([lrc, "init", "llama", "--preset", "small", "--seed", "2", "-o", w], check=True, stdout=subprocess.DEVNULL)
    params, _ = safetensors_io.load(w)
    g = torch.Generator().manual_seed(5)
    truth = {"input_layernorm": (-0.3, -1.2, -0.4), "post_attention_layernorm": (0.4, -0.6, -0.8)}  # beta, alpha_rot, beta_rot
    for site, (beta, arot, brot) in truth.items():
        gamma = 1 + 0.2 * torch.randn(128, generator=g, dtype=torch.float64)
        for l in range(4):
            gl = llama_ref.depth_gain(gamma, torch.tensor(0.0, dtype=torch.float64), torch.tensor(beta, dtype=torch.float64),
                                      torch.tensor(arot, dtype=torch.float64), torch.tensor(brot, dtype=torch.float64), l, 100.0)
            gl = gl * (1 + 1e-3 * torch.randn(128, generator=g, dtype=torch.float64))
            params["model.layers.%d.%s.weight" % (l, site)] = gl.to(torch.float32)
    safetensors_io.save(w, params)
    subprocess.run([lrc, "analyze", w, "--fit-layerrope", fit, "-o", js], check=True, stdout=subprocess.DEVNULL)
    got = json.load(open(js))["fit_layerrope"]
    out, _ = safetensors_io.load(fit)
    failed = 0
    for site, lr_site in (("input_layernorm", "in_attn"), ("post_attention_layernorm", "in_mlp")):
        pre = "model.layerrope.%s_" % lr_site
        worst = 0.0
        for l in range(4):
            gl = llama_ref.depth_gain(*(out[pre + k].double() for k in ("gamma", "alpha", "beta", "alpha_rot", "beta_rot")), l, 100.0)
            want = params["model.layers.%d.%s.weight" % (l, site)].double()
            worst = max(worst, float((gl - want).norm() / want.norm()))
        rel = got[lr_site]["relative_error"]
        ok = rel < 2e-3 and worst < 1e-2
        print("%s --fit-layerrope %s from %s: relative error %.2e, per-layer gains rebuilt from the file within %.2e "
              "(beta %.3f, alpha_rot %.3f, beta_rot %.3f; generated from %s)" % ("ok  " if ok else "FAIL", lr_site, site, rel, worst,
                                                                               got[lr_site]["beta"], got[lr_site]["alpha_rot"],
                                                                               got[lr_site]["beta_rot"], truth[site]))
        failed |= not ok
    for k in out:
        if ".layers." in k and ("input_layernorm" in k or "post_attention_layernorm" in k):
            print("FAIL --fit-layerrope: %s left in the file" % k)
            failed = 1
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]], dtype=torch.int32)
    safetensors_io.save(os.path.join(tmp, "tok.st"), {"tokens": tokens})
    r = subprocess.run([lrc, "forward", "llama", "--preset", "small", "--set", "norm=layerrope", "--weights", fit,
                        "--input", os.path.join(tmp, "tok.st"), "-o", os.path.join(tmp, "logits.st")], capture_output=True, text=True)
    if r.returncode:
        print("FAIL the fitted file does not run as a LayerRoPE model: %s" % r.stderr.strip())
        failed = 1
    return failed


def main():
    lrc = sys.argv[1]
    rng = np.random.default_rng(11)
    params = checkpoint(rng)
    p64 = {k: v.double().numpy() for k, v in params.items()}
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        path, js = os.path.join(tmp, "w.st"), os.path.join(tmp, "a.json")
        safetensors_io.save(path, params)
        prefix = os.path.join(tmp, "fig")
        subprocess.run([lrc, "analyze", path, "--layers", str(L), "--head-dim", "8", "-o", js, "--plot", prefix], check=True,
                       stdout=subprocess.DEVNULL)
        got = json.load(open(js))
        for fig in ("input_layernorm", "post_attention_layernorm", "layerrope"):  # --plot: a PNG of each
            png = "%s_%s.png" % (prefix, fig)
            if not os.path.exists(png) or open(png, "rb").read(8) != b"\x89PNG\r\n\x1a\n":
                print("FAIL --plot drew no %s" % png)
                failed = 1
    worst = 0.0

    def close(what, a, b, tol=1e-9):
        nonlocal worst, failed
        err = abs(a - b) / max(abs(b), 1e-12)
        worst = max(worst, err)
        if not err <= tol:
            print("FAIL %s: lrc %.17g, numpy %.17g" % (what, a, b))
            failed = 1
    for site in ("input_layernorm", "post_attention_layernorm"):
        gs = np.stack([p64["model.layers.%d.%s.weight" % (l, site)] for l in range(L)])
        rows, arc = expected_site(gs)
        close(site + " arc", got[site]["arc_degrees"], arc)
        want, dev = expected_trajectory(gs, 8, 0.1)
        tr = got[site]["trajectory"]
        for k, v in want.items():
            close("%s trajectory %s" % (site, k), tr[k], v)
        if [d["dim"] for d in tr["largest_deviations"]] != [j for _, j in dev] or want["deactivated"] < 1 or want["deviating"] < 2:
            print("FAIL %s trajectory: deviating dimensions %s, numpy %s" % (site, tr["largest_deviations"], dev))
            failed = 1
        for d, (r, _) in zip(tr["largest_deviations"], dev):
            close("%s trajectory r of dim %d" % (site, d["dim"]), d["r"], r)
        for axis in ("mds_x", "mds_y"):  # up to the axis's sign
            sign = 1 if sum(r[axis] * g[axis] for r, g in zip(rows, got[site]["layers"])) >= 0 else -1
            for r, g in zip(rows, got[site]["layers"]):
                close("%s layer %d %s" % (site, r["layer"], axis), sign * g[axis], r[axis])
        for r, g in zip(rows, got[site]["layers"]):
            for k in ("mean", "p50", "p90", "p99", "cos_prev", "cos_first"):
                if k in r:
                    close("%s layer %d %s" % (site, r["layer"], k), g[k], r[k])
                elif k in g:
                    print("FAIL %s layer %d: %s reported" % (site, r["layer"], k))
                    failed = 1
    for site in ("in_attn", "out_attn", "in_mlp", "out_mlp"):
        a, b, ar, br = (float(p64["model.layerrope.%s_%s" % (site, k)][0]) for k in ("alpha", "beta", "alpha_rot", "beta_rot"))
        for l, g in enumerate(got["layerrope"][site]["layers"]):
            u = math.log(l + 1)
            close("%s layer %d e^r" % (site, l), g["magnitude"], math.exp(a + b * u))
            close("%s layer %d theta" % (site, l), g["theta_degrees"], math.degrees(math.exp(ar + br * u)))
            # |gamma_eff_l| / |gamma_eff_0| from the gains themselves: rotation keeps the norm
            close("%s layer %d ratio" % (site, l), g["gain_ratio"], math.exp(a + b * u) / math.exp(a))
            close("%s layer %d lns" % (site, l), g["lns"], 1 / math.sqrt(l + 1))
        if len(got["layerrope"][site]["layers"]) != L:
            print("FAIL %s: %d layers" % (site, len(got["layerrope"][site]["layers"])))
            failed = 1
    with tempfile.TemporaryDirectory() as tmp:
        failed |= check_fit(lrc, tmp)
        failed |= check_hf_logits(lrc, tmp)
    print("%s lrc analyze against numpy: worst relative difference %.3e (percentiles, cosines, MDS up to sign, arc, "
          "shared trajectory, LayerRoPE multipliers)" % ("FAIL" if failed else "ok  ", worst))
    return failed


if __name__ == "__main__":
    sys.exit(main())
