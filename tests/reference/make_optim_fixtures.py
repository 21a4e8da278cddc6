#!/usr/bin/python3
"""Optimizer fixtures: lrc train's AdamW and learning-rate schedule, computed
independently by PyTorch (torch.optim.AdamW, torch.nn.utils.clip_grad_norm_)
and by a closed form of the schedule written here, for tests/unit/test_optim.c
and tests/unit/test_cuda_optim.c.

Writes tests/fixtures/optim/:
  <case>.safetensors  F32: 'init/<p>' the parameters before step 0,
                      'grad/<step>/<micro>/<p>' the gradients (micro-batch
                      0..accum-1), and after each step 'p/<step>/<p>',
                      'm/<step>/<p>', 'v/<step>/<p>' (PyTorch's exp_avg and
                      exp_avg_sq). __metadata__: the settings (weight_decay,
                      decay_all, clip, accum, beta1, beta2, eps, steps) and, as
                      JSON arrays of exact doubles, 'lr' (the learning rate of
                      every step) and 'norm' (clip_grad_norm_'s total norm of
                      the averaged gradients, f32).
  schedule.json       for several (steps, warmup) settings, the learning rate
                      of every step from the closed form below.

Seeded; byte-identical on rerun.
    /usr/bin/python3 tests/reference/make_optim_fixtures.py [--out DIR]    (from the repository root)
"""

import json
import math
import os
import sys
from collections import OrderedDict

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "optim")

# lrc train's constants (frontend/cli/cmd_train.c: lrc_adamw_cfg {0.9, 0.999, 1e-8, ...}
# and lrc_schedule_cfg {lr, warmup, 0.1, steps}; docs/cli.md says the same)
BETAS = (0.9, 0.999)
EPS = 1e-8
FLOOR = 0.1
STEPS = 10

# name -> shape. lrc decays tensors of two or more dimensions unless
# --decay-all (runtime/train.c: shape.ndim >= 2); 'probe' gets gradients near
# eps (1e-8), so that where eps enters the update shows in the weights.
SHAPES = OrderedDict([("w", (4, 6)), ("gain", (6,)), ("scalar", ()), ("probe", (3,))])


def lr_closed_form(step, steps, warmup, peak):
    """lrc's schedule: W = floor(warmup * steps) warm-up steps rising linearly
    to the peak (step s of them at peak (s + 1) / W), then a half cosine from the
    peak at step W to FLOOR x peak at step `steps` (never reached: the last step
    is steps - 1)."""
    w = math.floor(warmup * steps)
    if step < w:
        return peak * (step + 1) / w
    frac = min(1.0, (step - w) / (steps - w)) if steps > w else 1.0
    return peak * FLOOR + peak * (1.0 - FLOOR) * (1.0 + math.cos(math.pi * frac)) / 2.0


def initial_params(gen):
    p = OrderedDict()
    p["w"] = torch.randn(SHAPES["w"], generator=gen) * 0.5
    p["gain"] = 1.0 + 0.1 * torch.randn(SHAPES["gain"], generator=gen)
    p["scalar"] = torch.tensor(-0.5)
    p["probe"] = 1.0 + 0.1 * torch.randn(SHAPES["probe"], generator=gen)
    return p


def gradients(gen, accum):
    """[step][micro] -> name -> f32 gradient. Step s's size alternates between
    large and small (so that a max norm between them clips some steps only);
    'probe' stays about 1e-8; 'scalar' keeps one sign, so that its moment never
    passes through zero (where a relative error of one number means nothing)."""
    out = []
    for s in range(STEPS):
        size = 8.0 if s % 3 == 1 else 1.5
        micro = []
        for _ in range(accum):
            g = OrderedDict()
            for name, shape in SHAPES.items():
                x = torch.randn(shape, generator=gen)
                if name == "scalar":
                    x = x.abs() + 0.5
                g[name] = (x * 2e-8 if name == "probe" else x * size).to(torch.float32)
            micro.append(g)
        out.append(micro)
    return out


def run_case(name, weight_decay, decay_all, clip, accum, warmup, peak):
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    init = initial_params(gen)
    grads = gradients(gen, accum)
    params = OrderedDict((k, v.clone().to(torch.float32).requires_grad_(True)) for k, v in init.items())
    decayed = [p for p in params.values() if decay_all or p.dim() >= 2]
    plain = [p for p in params.values() if not (decay_all or p.dim() >= 2)]
    groups = [{"params": decayed, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=peak, betas=BETAS, eps=EPS,
                            amsgrad=False, foreach=False, maximize=False)
    out = OrderedDict(("init/" + k, v.detach().clone()) for k, v in params.items())
    lrs, norms, clipped = [], [], 0
    for s in range(STEPS):
        for k, p in params.items():
            # lrc train --accum K: the K micro-batches' gradients summed in f32
            # in order, then divided by K (frontend/cli/cmd_train.c, engine_grads;
            # runtime/cuda_optim.c's lrc_opt_accum), clipping after, on the average
            acc = grads[s][0][k].clone()
            for j in range(1, accum):
                acc = acc + grads[s][j][k]
            p.grad = acc / float(accum) if accum > 1 else acc
            for j in range(accum):
                out["grad/%d/%d/%s" % (s, j, k)] = grads[s][j][k]
        total = torch.nn.utils.clip_grad_norm_(list(params.values()), clip if clip > 0 else float("inf"))
        norms.append(float(total))
        clipped += clip > 0 and float(total) > clip
        lr = lr_closed_form(s, STEPS, warmup, peak)
        lrs.append(lr)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        for k, p in params.items():
            state = opt.state[p]
            out["p/%d/%s" % (s, k)] = p.detach().clone()
            out["m/%d/%s" % (s, k)] = state["exp_avg"].clone()
            out["v/%d/%s" % (s, k)] = state["exp_avg_sq"].clone()
    if clip > 0 and not 0 < clipped < STEPS:
        raise SystemExit("%s: clipping at %g clips %d of %d steps; pick a max norm that clips some only" % (name, clip, clipped, STEPS))
    meta = {"weight_decay": repr(weight_decay), "decay_all": "1" if decay_all else "0", "clip": repr(clip),
            "accum": str(accum), "beta1": repr(BETAS[0]), "beta2": repr(BETAS[1]), "eps": repr(EPS),
            "steps": str(STEPS), "warmup": repr(warmup), "peak": repr(peak), "floor": repr(FLOOR),
            "clipped_steps": str(clipped), "lr": json.dumps(lrs), "norm": json.dumps(norms)}
    st.save(os.path.join(OUT, name + ".safetensors"), out, meta)
    print("  optim/%-10s %d steps, %d clipped, |p| change %.3e" % (
        name, STEPS, clipped, max((out["p/%d/%s" % (STEPS - 1, k)] - init[k]).abs().max().item() for k in init)))


def main():
    # --out DIR: write DIR/optim instead (tests/reference/check_fixtures.sh)
    global OUT
    if len(sys.argv) == 3 and sys.argv[1] == "--out":
        OUT = os.path.join(os.path.abspath(sys.argv[2]), "optim")
    elif len(sys.argv) != 1:
        sys.exit("usage: %s [--out DIR]   (writes DIR/optim; default %s)" % (sys.argv[0], OUT))
    os.makedirs(OUT, exist_ok=True)
    # (name, weight decay, --decay-all, --clip, --accum, --warmup, peak lr)
    run_case("plain", 0.0, False, 0.0, 1, 0.3, 0.05)
    run_case("decay", 0.1, False, 0.0, 1, 0.0, 0.05)
    run_case("decay_all", 0.1, True, 0.0, 1, 0.3, 0.05)
    run_case("clip", 0.1, False, 12.0, 1, 0.2, 0.05)
    run_case("accum", 0.1, False, 8.0, 3, 0.3, 0.05)
    settings = [(10, 0.0), (10, 0.3), (10, 0.15), (100, 0.1), (7, 1.0), (1, 0.0), (100, 0.29)]
    sched = {"peak": 6e-4, "floor": FLOOR, "cases": [
        {"steps": n, "warmup": w, "lr": [lr_closed_form(s, n, w, 6e-4) for s in range(n)]} for n, w in settings]}
    with open(os.path.join(OUT, "schedule.json"), "w") as f:
        json.dump(sched, f, indent=1)
        f.write("\n")
    print("  optim/schedule.json: %d settings" % len(settings))


if __name__ == "__main__":
    main()
