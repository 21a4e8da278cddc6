#!/usr/bin/python3
"""A ViT training step of lrc against PyTorch eager on the CPU (f32), same model, batch and threads.

    /usr/bin/python3 bench/cpu_vit_train.py [--preset small] [--norms pre,layerrope] [--batch 128]
        [--threads 2] [--steps 12] [--repeat 10] [--rounds 3] [--lrc build/lrc]

One step: forward, cross-entropy over the class logits, backward, AdamW over every parameter.
Both sides run in this one invocation, interleaved in rounds:
  * torch: an idiomatic eager ViT of the same config (nn.Conv2d patches, class token and
    positions, nn.LayerNorm, attention as two matmuls and a softmax, F.gelu, nn.Linear),
    LayerRoPE gains recomputed from their parameters every step for norm=layerrope,
    F.cross_entropy, loss.backward(), torch.optim.AdamW(0.9, 0.999, 1e-8), zero_grad(None);
    random images (a step's time does not depend on the pixels);
  * lrc: `lrc train models/vit.lua --preset P --set norm=N --steps S --batch B` on
    Fashion-MNIST; each step's images/s in metrics.jsonl is measured around the step alone;
    step 1 is dropped, the round's figure is the median of steps 2..S.
Each side's figure is the median over rounds; the ratio torch/lrc is printed per norm (above
1: lrc is faster). No target: this is for the record (exit 0 measured, 1 lrc failed).
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PRESETS = {"small": dict(image_size=28, channels=1, patch=4, n_classes=10, d=64, L=6, H=2, d_ff=256),
           "tiny": dict(image_size=8, channels=1, patch=4, n_classes=10, d=16, L=2, H=2, d_ff=32)}


def parse_args():
    ap = common.model_run_parser(__doc__)
    ap.set_defaults(preset="small", batch=128, model="models/vit.lua")
    ap.add_argument("--norms", default="pre,layerrope")
    ap.add_argument("--steps", type=int, default=12, help="lrc train steps per round (step 1 dropped)")
    ap.add_argument("--repeat", type=int, default=10, help="timed torch steps per round and norm")
    a = ap.parse_args()
    if a.preset not in PRESETS:
        ap.error("--preset: one of %s" % ", ".join(PRESETS))
    a.norms = a.norms.split(",")
    return a


def torch_stepper(c, norm, batch):
    torch = common.import_torch()
    import torch.nn as nn
    import torch.nn.functional as F
    d, H, S, p = c["d"], c["H"], c["image_size"], c["patch"]
    T = (S // p) ** 2 + 1

    def gain_params():  # one LayerRoPE site: gamma and four scalars (beta = 0 for ViTs)
        return nn.ParameterList([nn.Parameter(torch.ones(d))] + [nn.Parameter(torch.tensor(v)) for v in (0.0, 0.0, 0.0, -0.5)])

    def gain(site, l):
        g, a_, b_, ar, br = site
        u = math.log(l + 1.0)
        th = torch.exp(ar + br * u) * 100.0 ** (-2.0 * torch.arange(d // 2) / d)
        c0, s0 = torch.cos(th), torch.sin(th)
        g0, g1 = g[0::2], g[1::2]
        return (torch.exp(a_ + b_ * u) * torch.stack([g0 * c0 - g1 * s0, g0 * s0 + g1 * c0], -1)).reshape(d)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-6, elementwise_affine=norm == "pre"), nn.LayerNorm(d, eps=1e-6, elementwise_affine=norm == "pre")
            if norm != "pre":
                self.b1, self.b2 = nn.Parameter(torch.zeros(d)), nn.Parameter(torch.zeros(d))
            self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.up, self.down = nn.Linear(d, c["d_ff"]), nn.Linear(c["d_ff"], d)

        def forward(self, h, l, sites):
            x = self.ln1(h) if norm == "pre" else self.ln1(h) * gain(sites[0], l) + self.b1
            q, k, v = self.qkv(x).view(batch, T, 3, H, d // H).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // H), -1) @ v
            a = self.o(a.transpose(1, 2).reshape(batch, T, d))
            h = h + (a if norm == "pre" else a * gain(sites[2], l))
            x = self.ln2(h) if norm == "pre" else self.ln2(h) * gain(sites[1], l) + self.b2
            m = self.down(F.gelu(self.up(x)))
            return h + (m if norm == "pre" else m * gain(sites[3], l))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(c["channels"], d, p, stride=p)
            self.cls, self.pos = nn.Parameter(torch.zeros(1, 1, d)), nn.Parameter(torch.zeros(1, T, d))
            self.blocks = nn.ModuleList(Block() for _ in range(c["L"]))
            self.sites = nn.ModuleList(gain_params() for _ in range(4)) if norm != "pre" else []
            self.ln, self.head = nn.LayerNorm(d, eps=1e-6), nn.Linear(d, c["n_classes"])

        def forward(self, img):
            e = self.patch(img).flatten(2).transpose(1, 2)
            h = torch.cat([self.cls.expand(batch, -1, -1), e], 1) + self.pos
            for l, b in enumerate(self.blocks):
                h = b(h, l, self.sites)
            return self.head(self.ln(h[:, 0]))

    torch.manual_seed(0)
    model = ViT()
    img = torch.randn(batch, c["channels"], S, S)
    labels = torch.randint(0, c["n_classes"], (batch,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    def step():
        loss = F.cross_entropy(model(img), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss)
    return step


def lrc_steps(lrc, a, norm, run):
    cmd = [lrc, "train", a.model, "--preset", a.preset, "--set", "norm=" + norm, "--steps", str(a.steps), "--lr", "1e-4",
           "--batch", str(a.batch), "--eval-every", str(a.steps), "--threads", str(a.threads), "-o", run]
    if a.preset == "tiny":
        cmd[cmd.index("--set") + 2:cmd.index("--set") + 2] = ["--set", "image_size=28"]
    proc = subprocess.run(cmd, cwd=common.REPO, env=common.ORIGINAL_ENV, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("%s\nexit %d\n%s" % (" ".join(cmd), proc.returncode, (proc.stderr or proc.stdout)[-3000:]))
    with open(os.path.join(run, "metrics.jsonl")) as f:
        ips = [json.loads(line)["images_per_s"] for line in f if line.strip()]
    return [a.batch / x for x in ips[1:]]


def main():
    a = parse_args()
    chosen = common.choose_blas_core(a.blas_core)  # before torch is imported; may run this script again
    common.set_omp_wait_policy(a.omp_wait_policy)
    common.import_torch()
    blas = common.torch_blas()
    common.require_openblas(blas)
    blas["num_threads"] = common.set_torch_threads(a.threads, blas)
    c = dict(PRESETS[a.preset])
    if a.preset == "tiny":
        c["image_size"] = 28
    lrc = a.lrc if os.path.isabs(a.lrc) else os.path.join(common.REPO, a.lrc)
    common.print_header("lrc CPU ViT training step vs PyTorch eager (f32)", a.threads, torch_blas_info=blas, extra=[
        ("model", "vit preset %s, norms %s (d=%d L=%d heads=%d d_ff=%d patch=%d, %d tokens)" % (
            a.preset, ",".join(a.norms), c["d"], c["L"], c["H"], c["d_ff"], c["patch"], (c["image_size"] // c["patch"]) ** 2 + 1)),
        ("shape", "batch %d images of %dx%d" % (a.batch, c["image_size"], c["image_size"])),
        ("schedule", "%d rounds; torch %d timed steps per norm, lrc train --steps %d (step 1 dropped)" % (a.rounds, a.repeat, a.steps)),
        ("lrc", lrc), ("BLAS core", chosen or "as the environment has it (--blas-core %s)" % a.blas_core), ("load avg", common.loadavg() + " (start)")])
    work = tempfile.mkdtemp(prefix="lrc-vit-bench-")
    lrc_error = None
    try:
        steppers = {n: torch_stepper(c, n, a.batch) for n in a.norms}
        for n in a.norms:
            steppers[n]()
        sides = ["torch-" + n for n in a.norms] + ["lrc-" + n for n in a.norms]
        per = {s: [] for s in sides}
        for r in range(a.rounds):
            parts = []
            for n in a.norms:
                t = common.median(common.time_call(steppers[n], a.repeat))
                per["torch-" + n].append(t)
                parts.append("torch-%s %.1f ms" % (n, t * 1e3))
            for n in (a.norms if r % 2 == 0 else a.norms[::-1]):
                run = os.path.join(work, "run-%s-%d" % (n, r))
                try:
                    t = common.median(lrc_steps(lrc, a, n, run))
                except RuntimeError as e:
                    lrc_error = "lrc train (%s) failed" % n
                    print("lrc FAILED: %s" % e)
                    break
                shutil.rmtree(run, ignore_errors=True)
                per["lrc-" + n].append(t)
                parts.append("lrc-%s %.1f ms" % (n, t * 1e3))
            print("round %d/%d: %s" % (r + 1, a.rounds, "; ".join(parts)))
            sys.stdout.flush()
            if lrc_error:
                break
        print("-" * 78)
        med = {s: common.median(per[s]) for s in sides if per[s]}
        for s in sides:
            if s in med:
                print("%-16s %9.1f ms  %8.0f images/s" % (s, med[s] * 1e3, a.batch / med[s]))
        for n in a.norms:
            if "lrc-" + n in med:
                print("step %-10s torch %.1f ms / lrc %.1f ms = %.2fx" % (n, med["torch-" + n] * 1e3, med["lrc-" + n] * 1e3,
                                                                         med["torch-" + n] / med["lrc-" + n]))
        return common.finish(lrc_error, ("lrc side FAILED", "torch figures above are still valid"), False, [], "")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    common.run_timed_main(main)
