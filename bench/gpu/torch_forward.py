#!/usr/bin/env python3
"""PyTorch's forward of the same LLaMA on the GPU, bf16: eager and torch.compile, timed.

    python3 bench/gpu/torch_forward.py --preset 1b --norm pre --batch 8 --seq 256
        [--weights W.safetensors] [--repeat 20] [--logits OUT.safetensors]
    python3 bench/gpu/torch_forward.py --preset 1b --weights W --decode 128 --prompt-len 16 --ctx 256

Prints `torch-eager: median X ms` and `torch-compile: median X ms` (CUDA events around each
call, after warm-up; torch.compile's compilation is not timed). The model is bench/common.py's
NNForward (F.linear, rsqrt RMSNorm, F.silu, cached RoPE tables) with attention through
F.scaled_dot_product_attention when this torch has it, the way a PyTorch user writes it;
parameters in bf16 on cuda:0. With --weights (lrc init's file) both frameworks compute
the same function, and --logits writes the eager logits (f32) for a check.

--decode N: greedy decoding of N tokens at batch 1 after a prompt of --prompt-len ids,
with a static KV cache of --ctx positions (the way Hugging Face's StaticCache and
gpt-fast decode): one step's launches captured once in a CUDA graph and replayed per
token, the token fed back on the device. Prints `torch-decode-eager: X tokens/s` and
`torch-decode-graph: X tokens/s` (wall clock over the N steps, synchronized at both ends)
and the ids, for a comparison with lrc generate's.
Pre-norm LLaMA only.
"""

import argparse
import os
import sys
import time

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


def timed(fn, repeat, cuda=True):
    import time
    import torch
    start, end = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else (None, None)
    ms = []
    for _ in range(repeat):
        if not cuda:  # --device cpu: a check of the model here, not a benchmark
            t0 = time.perf_counter()
            fn()
            ms.append(1e3 * (time.perf_counter() - t0))
            continue
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        ms.append(start.elapsed_time(end))
    return sorted(ms)[len(ms) // 2]


def decode(a, torch, cfg, params, dev, dt):
    """Greedy decoding with a static KV cache; tokens/s eager and as a replayed CUDA graph."""
    import torch.nn.functional as F
    if a.norm != "pre":
        sys.exit("--decode: only the pre-norm LLaMA")
    L, H, Dh, d = cfg.n_layers, cfg.n_heads, cfg.head_dim, cfg.n_heads * cfg.head_dim
    half = Dh // 2
    ctx = a.ctx
    i = torch.arange(half, dtype=torch.float64)
    inv = torch.tensor(float(cfg.rope_base), dtype=torch.float64) ** (-2.0 * i / Dh)
    ang = torch.arange(ctx, dtype=torch.float64)[:, None] * inv[None, :]
    cos_t, sin_t = torch.cos(ang).to(dev, dt), torch.sin(ang).to(dev, dt)
    kc = torch.zeros(L, 1, H, ctx, Dh, device=dev, dtype=dt)
    vc = torch.zeros(L, 1, H, ctx, Dh, device=dev, dtype=dt)
    pos_ids = torch.arange(ctx, device=dev)

    def norm(x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + cfg.eps).to(dt) * w

    def attend(q, k, v, mask):
        if hasattr(F, "scaled_dot_product_attention"):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return torch.softmax(q @ k.transpose(-1, -2) / Dh ** 0.5 + mask, dim=-1) @ v  # torch 1.13 (--device cpu here)

    def step(tok, pos):  # tok [1, 1] long, pos [1] long: the logits of the next token
        h = F.embedding(tok, params["model.embed_tokens.weight"])
        cos, sin = cos_t.index_select(0, pos)[None, None], sin_t.index_select(0, pos)[None, None]
        mask = torch.where(pos_ids <= pos, 0.0, float("-inf")).to(dt)[None, None, None, :]
        for l in range(L):
            pre = "model.layers.%d." % l
            x = norm(h, params[pre + "input_layernorm.weight"])
            q, k, v = (F.linear(x, params[pre + "self_attn.%s_proj.weight" % n]).view(1, 1, H, Dh).transpose(1, 2)
                       for n in "qkv")
            q = torch.cat([q[..., :half] * cos - q[..., half:] * sin, q[..., half:] * cos + q[..., :half] * sin], -1)
            k = torch.cat([k[..., :half] * cos - k[..., half:] * sin, k[..., half:] * cos + k[..., :half] * sin], -1)
            kc[l].index_copy_(2, pos, k)
            vc[l].index_copy_(2, pos, v)
            o = attend(q, kc[l], vc[l], mask)
            h = h + F.linear(o.transpose(1, 2).reshape(1, 1, d), params[pre + "self_attn.o_proj.weight"])
            x = norm(h, params[pre + "post_attention_layernorm.weight"])
            g = F.linear(x, params[pre + "mlp.gate_proj.weight"])
            u = F.linear(x, params[pre + "mlp.up_proj.weight"])
            h = h + F.linear(F.silu(g) * u, params[pre + "mlp.down_proj.weight"])
        return F.linear(norm(h, params["model.norm.weight"]), params["lm_head.weight"])[0, -1]

    prompt = [(7 * j + 3) % cfg.vocab for j in range(a.prompt_len)]
    tok = torch.zeros(1, 1, dtype=torch.long, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)

    def run(one_step, n):
        for j, t in enumerate(prompt[:-1]):  # the prompt a token at a time: prefill is not what is timed
            tok.fill_(t)
            pos.fill_(j)
            one_step()
        out = []
        cuda = dev.type == "cuda"
        if cuda:
            torch.cuda.synchronize()
        # n steps, as lrc generate times them: the prompt's last token in, the first new one out, ...
        tok.fill_(prompt[-1])
        t0 = time.perf_counter()
        for j in range(n):
            pos.fill_(len(prompt) - 1 + j)
            nxt = one_step()
            tok.copy_(nxt.view(1, 1))
            out.append(nxt)
        if cuda:
            torch.cuda.synchronize()
        return n / (time.perf_counter() - t0), [int(t) for t in out]

    with torch.no_grad():
        def eager():
            return step(tok, pos).argmax()
        run(eager, 4)
        tps, ids = run(eager, a.decode)
        print("torch-decode-eager: %.1f tokens/s (%d new tokens after %d, ctx %d, B=1, %s, torch %s)"
              % (tps, a.decode, len(prompt), ctx, str(dt).replace("torch.", ""), torch.__version__))
        if dev.type != "cuda":
            print("torch-decode-ids: %s" % " ".join(map(str, ids)))
            return 0
        graph, s = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            eager()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(graph):
            static_out = eager()

        def replay():
            graph.replay()
            return static_out
        run(replay, 4)
        tps_g, ids_g = run(replay, a.decode)
        print("torch-decode-graph: %.1f tokens/s (one CUDA graph a token)" % tps_g)
        print("torch-decode-ids: %s" % " ".join(map(str, ids_g)))
        if ids_g != ids:
            print("note: the graph's ids differ from eager's")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--norm", default="pre")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--weights")
    ap.add_argument("--input", help="the tokens (lrc's input file: 'tokens' I32 [B, T]) instead of random ones")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--logits")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--backward", action="store_true",
                    help="time forward, next-token cross-entropy and backward (a training step without the optimizer)")
    ap.add_argument("--decode", type=int, default=0, help="greedy decoding of N tokens, batch 1, static KV cache")
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                    help="cpu: f32 on the host, untimed by events, no torch.compile (a check of the script without a GPU)")
    a = ap.parse_args()
    torch = common.import_torch()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch: no CUDA device")
    dev, dt = (torch.device("cuda:0"), torch.bfloat16) if a.device == "cuda" else (torch.device("cpu"), torch.float32)
    if a.device == "cpu":
        a.no_compile = True
    cfg = common.model_config(a.preset, a.norm)
    if a.weights:
        import safetensors_io
        loaded, _ = safetensors_io.load(a.weights)
        params = common.check_params_f32(loaded, cfg)
    else:
        params = common.random_params_f32(cfg)
    params = {k: v.to(dev, dt).requires_grad_(a.backward) for k, v in params.items()}
    if a.decode:
        return decode(a, torch, cfg, params, dev, dt)
    if a.input:  # the very tokens lrc ran on: a logits check of anything else compares two functions of different inputs
        import safetensors_io
        tokens = safetensors_io.load(a.input)[0]["tokens"].to(torch.int32)
        if tuple(tokens.shape) != (a.batch, a.seq):
            sys.exit("--input: tokens of shape %s, expected [%d, %d]" % (list(tokens.shape), a.batch, a.seq))
        tokens = tokens.to(dev)
    else:
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
        if a.device == "cuda":
            torch.cuda.synchronize()
        print("%s: median %.3f ms%s" % (name, timed(run, a.repeat, a.device == "cuda"), note))
        return out

    out = measure("torch-eager", runner(model), " (%s%s, %s, B=%d T=%d, torch %s)" % (
        "forward+backward, " if a.backward else "", torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
        str(dt).replace("torch.", ""), a.batch, a.seq, torch.__version__))
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
