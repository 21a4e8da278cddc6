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


def main():
    lrc = sys.argv[1]
    rng = np.random.default_rng(11)
    params = checkpoint(rng)
    p64 = {k: v.double().numpy() for k, v in params.items()}
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        path, js = os.path.join(tmp, "w.st"), os.path.join(tmp, "a.json")
        safetensors_io.save(path, params)
        subprocess.run([lrc, "analyze", path, "--layers", str(L), "-o", js], check=True, stdout=subprocess.DEVNULL)
        got = json.load(open(js))
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
    print("%s lrc analyze against numpy: worst relative difference %.3e (percentiles, cosines, MDS up to sign, arc, "
          "LayerRoPE multipliers)" % ("FAIL" if failed else "ok  ", worst))
    return failed


if __name__ == "__main__":
    sys.exit(main())
