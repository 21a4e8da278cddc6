#!/usr/bin/env python3
"""PyTorch's forward of the same LLaMA on the GPU, bf16: eager and torch.compile, timed.

    python3 bench/gpu/torch_forward.py --preset 1b --norm pre --batch 8 --seq 256
        [--weights W.safetensors] [--repeat 20] [--logits OUT.safetensors]

Prints `torch-eager: median X ms` and `torch-compile: median X ms` (CUDA events around each
call, after warm-up; torch.compile's compilation is not timed). The model is bench/common.py's
NNForward (F.linear, rsqrt RMSNorm, F.silu, cached RoPE tables) with attention through
F.scaled_dot_product_attention when this torch has it, the way a PyTorch user writes it;
parameters in bf16 on cuda:0. With --weights (lrc init's file) both frameworks compute
the same function, and --logits writes the eager logits (f32) for a check.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "reference"))
import common  # noqa: E402


class GPUForward(common.NNForward):
    """NNForward with its tables on the device in the activations' dtype, attending through SDPA."""

    def __init__(self, cfg, device, dtype):
        super().__init__(cfg)
        self.device, self.dtype = device, dtype

    def tables(self, T):
        if T not in self._tables:
            cos, sin, mask = super().tables(T)
            self._tables[T] = tuple(t.to(self.device, self.dtype) for t in (cos, sin, mask))
        return self._tables[T]

    def attend(self, q, k, v, mask):
        import torch.nn.functional as F
        if not hasattr(F, "scaled_dot_product_attention"):
            return super().attend(q, k, v, mask)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def timed(fn, repeat):
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(repeat):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        ms.append(start.elapsed_time(end))
    return sorted(ms)[len(ms) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--norm", default="pre")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--weights")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--logits")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--backward", action="store_true",
                    help="time forward, next-token cross-entropy and backward (a training step without the optimizer)")
    a = ap.parse_args()
    torch = common.import_torch()
    if not torch.cuda.is_available():
        sys.exit("torch: no CUDA device")
    dev, dt = torch.device("cuda:0"), torch.bfloat16
    cfg = common.model_config(a.preset, a.norm)
    if a.weights:
        import safetensors_io
        loaded, _ = safetensors_io.load(a.weights)
        params = common.check_params_f32(loaded, cfg)
    else:
        params = common.random_params_f32(cfg)
    params = {k: v.to(dev, dt).requires_grad_(a.backward) for k, v in params.items()}
    tokens = common.random_tokens(cfg, a.batch, a.seq).to(dev)
    labels = torch.roll(tokens.long(), -1, dims=1)
    labels[:, -1] = -100
    model = GPUForward(cfg, dev, dt)

    def step(fn):
        import torch.nn.functional as F
        logits = fn(params, tokens)
        loss = F.cross_entropy(logits.float().view(-1, cfg.vocab), labels.view(-1), ignore_index=-100)
        loss.backward()
        for p in params.values():
            p.grad = None
        return logits

    def runner(fn):
        def run():
            if a.backward:
                return step(fn)
            with torch.no_grad():
                return fn(params, tokens)
        return run

    def measure(name, run, note=""):
        for _ in range(3):
            out = run()
        torch.cuda.synchronize()
        print("%s: median %.3f ms%s" % (name, timed(run, a.repeat), note))
        return out

    out = measure("torch-eager", runner(model), " (%s%s, bf16, B=%d T=%d, torch %s)" % (
        "forward+backward, " if a.backward else "", torch.cuda.get_device_name(0), a.batch, a.seq, torch.__version__))
    if a.logits:
        import safetensors_io
        safetensors_io.save(a.logits, {"logits": out.detach().float().cpu()})
    if not a.no_compile and hasattr(torch, "compile"):
        measure("torch-compile", runner(torch.compile(lambda p, t: model(p, t))))
    elif not a.no_compile:
        print("torch-compile: not available in torch %s" % torch.__version__)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
