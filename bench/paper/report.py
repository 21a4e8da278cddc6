#!/usr/bin/python3
"""report.py OUT_DIR DEST — bench/paper/REPORT.md from what run.sh left in OUT_DIR.

Every number in the report is read from the runs' own files (sweep.jsonl,
sweep.md, diagnose and analyze JSON, metrics.jsonl, eval output); the plots are
drawn by gnuplot. Nothing here trains or evaluates anything."""
import json, math, os, re, shutil, subprocess, sys

ARMS = ["pre", "peri", "lns", "layerrope"]
SITES = ["in_attn", "out_attn", "in_mlp", "out_mlp"]


def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def best_run(out, arm):
    pts = [p for p in jsonl(f"{out}/sweep/sweep.jsonl") if p["arm"] == f"norm={arm}" and not p["diverged"]]
    return min(pts, key=lambda p: p["val_loss"])


def depth_table(out):
    """{arm: {layers: (val_loss or None when diverged, rate)}}, 12 layers from the sweep"""
    t = {}
    for a in ARMS:
        b = best_run(out, a)
        t[a] = {12: (b["val_loss"], b["lr"])}
        for p in jsonl(f"{out}/depth-{a}/sweep.jsonl"):
            L = int(re.search(r"n_layers=(\d+)", p["run"]).group(1))
            t[a][L] = (None if p["diverged"] else p["val_loss"], p["lr"])
    return t


def params(layers):
    """the parameter count lrc inspect reports for the bench's shape"""
    lrc = os.environ.get("LRC", "build/lrc")
    r = subprocess.run([lrc, "inspect", "models/llama.lua", "--preset", "small", "--set", "d_model=64", "--set", "n_heads=2",
                        "--set", "d_ff=176", "--set", f"n_layers={layers}", "--params"], capture_output=True, text=True, check=True)
    return int(re.search(r"total (\d+)", r.stdout).group(1))


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def plot_lines(png, xlabel, ylabel, curves, logx=False, logy=False):
    """curves: [(title, [(x, y), ...])]"""
    s = f"set terminal pngcairo size 900,600\nset output '{png}'\nset xlabel '{xlabel}'\nset ylabel '{ylabel}'\nset key outside right\nset grid\n"
    s += "set logscale x\n" if logx else ""
    s += "set logscale y\n" if logy else ""
    s += "plot " + ", ".join(f"'-' with linespoints title '{t}'" for t, _ in curves) + "\n"
    for _, pts in curves:
        s += "".join(f"{x} {y}\n" for x, y in pts) + "e\n"
    gnuplot(s)


def sweep_section(out, dest, md):
    shutil.copy(f"{out}/sweep/sweep.png", f"{dest}/sweep.png")
    md.append("## 1. Learning-rate sweep at 12 layers (the paper's Fig. 4 and 6, Table 9)\n")
    md.append("`lrc sweep`'s own table (`sweep.md`), rates in absolute units; L0 = ln 256 = 5.545 nats/byte:\n")
    md.append(open(f"{out}/sweep/sweep.md").read().strip() + "\n")
    md.append("![loss against rate](sweep.png)\n")


def depth_section(out, dest, md):
    t = depth_table(out)
    depths = sorted({L for a in ARMS for L in t[a]})
    md.append("## 2. Depth at width 64, each arm at its best rate from §1 (Fig. 5 and 16)\n")
    md.append("Final validation loss (nats/byte); 12 layers is the §1 run.\n")
    md.append("| layers | " + " | ".join(f"{a} (lr {t[a][12][1]:g})" for a in ARMS) + " |")
    md.append("|---|" + "---|" * len(ARMS))
    for L in depths:
        cells = []
        best = min(t[a][L][0] for a in ARMS if L in t[a] and t[a][L][0] is not None)
        for a in ARMS:
            v = t[a].get(L, (None,))[0]
            cells.append("diverged" if v is None else (f"**{v:.4f}**" if v == best else f"{v:.4f}"))
        md.append(f"| {L} | " + " | ".join(cells) + " |")
    md.append("")
    for a in ARMS:
        ls = [t[a][L][0] for L in depths if t[a].get(L, (None,))[0] is not None]
        mono = all(x > y for x, y in zip(ls, ls[1:]))
        md.append(f"- {a}: the loss {'falls at every added depth' if mono else 'does not fall monotonically with depth'}"
                  f" ({' → '.join(f'{x:.4f}' for x in ls)}).")
    md.append("")
    plot_lines(f"{dest}/depth.png", "layers", "final validation loss (nats/byte)",
               [(a, [(L, t[a][L][0]) for L in depths if t[a].get(L, (None,))[0] is not None]) for a in ARMS], logx=True)
    md.append("![loss against depth](depth.png)\n")


def variance_section(out, dest, md):
    md.append("## 3. The residual stream (Fig. 1a and 8)\n")
    md.append("`lrc diagnose`: the variance of the residual stream after each layer over 16 validation windows of 128 "
              "bytes, position 0 left out, and the root mean square of the multipliers each block reads "
              "and writes the stream with (1 where a placement has none).\n")
    for L in (12, 48):
        d = {a: json.load(open(f"{out}/diagnose-{a}-L{L}.json"))["layers"] for a in ARMS}
        md.append(f"**{L} layers** (each arm's {'best §1 run' if L == 12 else '§2 run'}):\n")
        md.append("| arm | Var[h_0] | Var[h_L-1] | ratio | read.attn first → last | write.attn first → last | read.mlp first → last | write.mlp first → last |")
        md.append("|---|---|---|---|---|---|---|---|")
        for a in ARMS:
            f, l = d[a][0], d[a][-1]
            m = [f"{f.get(k, 1):.3g} → {l.get(k, 1):.3g}" for k in ("read.attn", "write.attn", "read.mlp", "write.mlp")]
            md.append(f"| {a} | {f['variance']:.4g} | {l['variance']:.4g} | {l['variance'] / f['variance']:.3g} | " + " | ".join(m) + " |")
        md.append("")
        plot_lines(f"{dest}/variance-L{L}.png", "layer", "Var[h_l] (position 0 left out)",
                   [(a, [(x["layer"], x["variance"]) for x in d[a]]) for a in ARMS], logy=True)
        md.append(f"![residual variance, {L} layers](variance-L{L}.png)\n")


def slopes_over_training(run):
    rows = [m for m in jsonl(f"{run}/metrics.jsonl") if "layerrope" in m]
    return [(m["step"], m["layerrope"]) for m in rows]


def schedule_section(out, dest, md):
    md.append("## 4. LayerRoPE's learned schedule (Fig. 19-21)\n")
    md.append("Slopes were initialised at β = β_rot = −0.5 (α = α_rot = 0), base 100. `lrc analyze` of the best runs:\n")
    md.append("| layers | site | α | β (magnitude) | α_rot | β_rot | e^r first → last | θ first → last (deg) | ‖γ_eff_L‖/‖γ_eff_0‖ | LNS 1/√(L+1) |")
    md.append("|---|---|---|---|---|---|---|---|---|---|")
    for L in (12, 48):
        a = json.load(open(f"{out}/analyze-layerrope-L{L}.json"))["layerrope"]
        for s in SITES:
            x = a[s]
            f, l = x["layers"][0], x["layers"][-1]
            md.append(f"| {L} | {s} | {x['alpha']:+.3f} | {x['beta']:+.3f} | {x['alpha_rot']:+.3f} | {x['beta_rot']:+.3f} | "
                      f"{f['magnitude']:.3g} → {l['magnitude']:.3g} | {f['theta_degrees']:.1f} → {l['theta_degrees']:.1f} | "
                      f"{l['gain_ratio']:.3g} | {l['lns']:.3g} |")
    md.append("")
    for L in (12, 48):
        a = json.load(open(f"{out}/analyze-layerrope-L{L}.json"))["layerrope"]
        ups = [s for s in SITES if a[s]["beta"] > 0]
        md.append(f"- {L} layers: sites whose magnitude slope turned positive (a multiplier growing with depth): "
                  f"{', '.join(ups) if ups else 'none'}.")
    md.append("")
    b = best_run(out, "layerrope")
    tr = slopes_over_training(f"{out}/sweep/{b['run']}")
    md.append(f"β per site during training (the 12-layer run at lr {b['lr']:g}, `metrics.jsonl` at each evaluation):\n")
    md.append("| step | " + " | ".join(SITES) + " |")
    md.append("|---|" + "---|" * len(SITES))
    for step, r in tr:
        md.append(f"| {step} | " + " | ".join(f"{r[s + '_beta']:+.3f}" for s in SITES) + " |")
    md.append("")
    plot_lines(f"{dest}/slopes.png", "step", "beta (magnitude slope)",
               [(s, [(st, r[s + "_beta"]) for st, r in tr]) for s in SITES])
    shutil.copy(f"{out}/layerrope-L12_layerrope.png", f"{dest}/layerrope-L12_layerrope.png")
    md.append("![slopes during training](slopes.png) ![e^r against LNS](layerrope-L12_layerrope.png)\n")


def pre_section(out, dest, md):
    a = json.load(open(f"{out}/analyze-pre-L12.json"))
    b = best_run(out, "pre")
    md.append(f"## 5. `lrc analyze` of the Pre-Norm run (12 layers, lr {b['lr']:g}; Fig. 2 and 3)\n")
    md.append("| site | mean γ first → last | p99 first → last | cos(γ_last, γ_0) | MDS arc (deg) | fraction on the shared trajectory |")
    md.append("|---|---|---|---|---|---|")
    for s in ("input_layernorm", "post_attention_layernorm"):
        x = a[s]
        f, l = x["layers"][0], x["layers"][-1]
        frac = x.get("trajectory", {}).get("fraction")
        md.append(f"| {s} | {f['mean']:.4f} → {l['mean']:.4f} | {f['p99']:.4f} → {l['p99']:.4f} | {l['cos_first']:.5f} | "
                  f"{x['arc_degrees']:.1f} | {'-' if frac is None else f'{frac:.3f}'} |")
    md.append("")
    fit = a["fit_layerrope"]
    md.append(f"`--fit-layerrope` (base {fit['base']:g}): relative error per site, and the validation loss of the fitted "
              "checkpoint run with `--set norm=layerrope` beside the original's (`lrc eval`, 16 batches of 16×128, seed 1):\n")
    md.append("| site | relative error | β | α_rot | β_rot |")
    md.append("|---|---|---|---|---|")
    for s in SITES:
        x = fit[s]
        md.append(f"| {s} | {x['relative_error']:.3e} | {x['beta']:+.4f} | {x['alpha_rot']:+.3f} | {x['beta_rot']:+.3f} |")
    ev = {k: float(re.search(r"validation loss ([0-9.]+)", open(f"{out}/eval-{k}-fit.txt").read()).group(1))
          for k in ("pre", "layerrope")}
    md.append(f"\nValidation loss: Pre-Norm {ev['pre']:.4f}, the LayerRoPE fit {ev['layerrope']:.4f} nats/byte "
              f"({ev['layerrope'] - ev['pre']:+.4f}).\n")
    for s in ("input_layernorm", "post_attention_layernorm"):
        shutil.copy(f"{out}/pre-L12_{s}.png", f"{dest}/pre-L12_{s}.png")
        md.append(f"![{s}](pre-L12_{s}.png)")
    md.append("")


def sensitivity(out):
    """per arm: (eta*, L*, S) from sweep.jsonl, S over the rates every arm swept (one seed: L(eta) is the run's loss)"""
    pts = jsonl(f"{out}/sweep/sweep.jsonl")
    l0 = pts[0]["l0"]
    loss = {(p["arm"][5:], p["lr"]): (l0 if p["diverged"] else min(p["val_loss"], l0)) for p in pts}
    rates = sorted({r for _, r in loss})
    common = [r for r in rates if all((a, r) in loss for a in ARMS)]
    res = {}
    for a in ARMS:
        best = min(common, key=lambda r: loss[(a, r)])
        res[a] = (best, loss[(a, best)], sum(loss[(a, r)] - loss[(a, best)] for r in common) / len(common))
    return res


def summary_section(out, md):
    """the paper's claims beside what the runs measured, each computed from the files"""
    sv = sensitivity(out)
    t = depth_table(out)
    depths = sorted({L for a in ARMS for L in t[a]})
    md.append("## What the runs show, beside the paper's claims\n")
    md.append("| the paper (Section) | measured here |")
    md.append("|---|---|")
    pre, lr = sv["pre"], sv["layerrope"]
    md.append(f"| LayerRoPE cuts learning-rate sensitivity S by 3-10× (4.3, Table 9) | S: layerrope {lr[2]:.4f}, pre {pre[2]:.4f}, "
              f"peri {sv['peri'][2]:.4f}, lns {sv['lns'][2]:.4f}: pre's is {pre[2] / lr[2]:.1f}× layerrope's |")
    md.append(f"| LayerRoPE's best rate is 4-8× Pre-Norm's (4.3) | η*: layerrope {lr[0]:g}, pre {pre[0]:g} "
              f"({lr[0] / pre[0]:g}×); peri {sv['peri'][0]:g}, lns {sv['lns'][0]:g} |")
    best12 = min(ARMS, key=lambda a: sv[a][1])
    md.append(f"| LayerRoPE reaches the lowest loss (4.1) | at 12 layers, each at its η*: "
              + ", ".join(f"{a} {sv[a][1]:.4f}" for a in sorted(ARMS, key=lambda a: sv[a][1])) + f"; lowest: {best12} |")
    wins = []
    for L in depths:
        ok = {a: t[a][L][0] for a in ARMS if t[a].get(L, (None,))[0] is not None}
        wins.append(f"{L}: {min(ok, key=ok.get)}")
    mono = [a for a in ARMS if all(x > y for x, y in zip(*(lambda v: (v, v[1:]))([t[a][L][0] for L in depths if t[a].get(L, (None,))[0] is not None])))]
    md.append(f"| Only LayerRoPE improves monotonically with depth (4.2) | lowest loss at each depth: {', '.join(wins)}; "
              f"arms whose loss falls at every added depth: {', '.join(mono) if mono else 'none'} |")
    var = {a: json.load(open(f"{out}/diagnose-{a}-L48.json"))["layers"] for a in ARMS}
    ratio = {a: var[a][-1]["variance"] / var[a][0]["variance"] for a in ARMS}
    md.append("| LayerRoPE widens the residual stream rather than damping it (5.1) | Var[h_47] / Var[h_0] at 48 layers: "
              + ", ".join(f"{a} {ratio[a]:.3g}" for a in ARMS) + f"; layerrope's last-layer variance {var['layerrope'][-1]['variance']:.3g} "
              f"against pre's {var['pre'][-1]['variance']:.3g} |")
    an = json.load(open(f"{out}/analyze-layerrope-L48.json"))["layerrope"]
    md.append("| Write slopes β_mag turn positive from −0.5, reads stay negative (Appendix E) | at 48 layers: "
              + ", ".join(f"{s} {an[s]['beta']:+.3f}" for s in SITES) + " |")
    md.append("")


def main():
    out, dest = sys.argv[1], sys.argv[2]
    log = open(f"{out}/commands.txt").read()
    head = log.splitlines()[0].lstrip("# ")
    # run.sh appends: a rerun finds finished runs and repeats only what is missing,
    # so each command's time is the longest it took
    took = {}
    for cmd, secs in re.findall(r"^\+ (.*)\n  \((\d+) s\)$", log, re.M):
        cmd = re.sub(r"^\S*lrc ", "build/lrc ", cmd)  # whichever binary LRC named: as the README builds it
        took[cmd] = max(took.get(cmd, 0), int(secs))
    total = sum(took.values())
    cmds = "\n".join(f"+ {c}\n  ({t} s)" for c, t in took.items())
    steps = int(re.search(r"--steps (\d+)", cmds).group(1))
    rev = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    n6, n12, n48 = params(6), params(12), params(48)
    md = ["# The LayerRoPE paper's claims in miniature, measured with lrc alone\n",
          f"Made by `bench/paper/run.sh` (lrc {rev}) on {head}: all stages took "
          f"{total / 60:.0f} min, within the budget of about 90 minutes on 2 cores.\n",
          "## How this differs from the paper\n",
          "- **Scale.** LLaMA of width 64 (2 heads of 32, d_ff 176), 6 to 48 layers: "
          f"{n6 / 1e6:.2f} M to {n48 / 1e6:.2f} M parameters, against the paper's 58 M to 1.3 B. "
          f"The §1 model (12 layers) has {n12 / 1e6:.2f} M.",
          "- **Data.** The King James Bible as bytes (vocabulary 256), not C4 with a 32 000-token BPE. "
          "Validation is 32 768 fixed held-out bytes, the same for every arm (`--val-tokens`).",
          f"- **Tokens per parameter.** {steps} steps of 16 × 128 bytes: {steps * 2048 / 1e6:.2f} M tokens, "
          f"{steps * 2048 / n12:.1f} per parameter at 12 layers, against the paper's 4× Chinchilla (about 80).",
          "- **Recipe.** AdamW (0.9, 0.999), no weight decay, 10% warm-up then cosine to 0.1×, clipping at 1.0, "
          "one seed; rates double from 1e-3 to 6.4e-2 (the paper doubles too, over more rates and scales). "
          "Depth uses each arm's 12-layer optimum instead of a sweep per depth.",
          "- Results on a model this small and this briefly trained say how lrc's tools behave and what "
          "they measure; they do not confirm or refute the paper's claims at scale.\n"]
    summary_section(out, md)
    sweep_section(out, dest, md)
    depth_section(out, dest, md)
    variance_section(out, dest, md)
    schedule_section(out, dest, md)
    pre_section(out, dest, md)
    md.append("## Command lines\n")
    md.append("OUT is the run directory (`bench/paper/run.sh OUT`); the time each took is under it.\n")
    md.append("```\n# " + head + "\n" + cmds + "\n```\n")
    open(f"{dest}/REPORT.md", "w").write("\n".join(md))
    print(f"wrote {dest}/REPORT.md")


if __name__ == "__main__":
    main()
