#!/usr/bin/python3
"""Parcae parity fixtures: tests/fixtures/parcae/<case>/ with config.txt (state_init
zero, the case's T), weights.safetensors (random, every parameter away from its
initial value), input.safetensors (tokens), expected.safetensors (logits) and
grads.safetensors (the next-token loss and every parameter's gradient through the
last min(T, mu_bwd) iterations only), by parcae_ref in f64 from the stored f32 values.

    /usr/bin/python3 tests/reference/make_parcae_fixtures.py [--out DIR]     (from the repository root)
"""

import os
import sys
from collections import OrderedDict

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ref  # noqa: E402
import parcae_ref as ref  # noqa: E402
import make_fixtures as mf  # noqa: E402
import safetensors_io as st  # noqa: E402



def cases():
    out = []
    for norm in ("pre", "layerrope"):
        for T in (1, 3, 8):
            out.append(("%s_T%d" % (norm, T), ref.Config(d_model=16, n_heads=2, n_prelude=1, n_recurrent=2, n_coda=1,
                                                         vocab=37, T=T, mu_bwd=4, norm=norm), 2, 6))
    return out


def random_params(cfg, g):
    p = OrderedDict()
    for name, shape in ref.param_shapes(cfg).items():
        t = torch.randn(tuple(shape), generator=g, dtype=torch.float32)
        if name.endswith(("_alpha", "_beta", "_alpha_rot", "_beta_rot")):
            t = 0.3 * t
        elif name.endswith(("gamma", "layernorm.weight", "norm.weight")):
            t = 1.0 + 0.2 * t
        elif name.endswith(("A_log", "dt_bias")):
            t = 0.5 * t
        elif name.endswith("embed_tokens.weight"):
            t = 0.5 * t
        else:
            t = t / shape[-1] ** 0.5
        p[name] = t.contiguous()
    return p


def main():
    root = os.path.join(mf.set_output_dir(sys.argv, "writes DIR/parcae"), "parcae")
    for name, cfg, B, T in cases():
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        g = mf.gen("parcae/" + name)
        params = random_params(cfg, g)
        tokens = torch.randint(0, cfg.vocab, (B, T), generator=g, dtype=torch.int64).to(torch.int32)
        logits = ref.forward(params, tokens, cfg)
        p = OrderedDict((k, v.to(torch.float64).requires_grad_(True)) for k, v in params.items())
        k = min(cfg.T, cfg.mu_bwd)
        loss = llama_ref.next_token_loss(ref.forward(p, tokens, cfg, k_grad=k), tokens)
        loss.backward()
        for kname, v in p.items():
            # A_bar multiplies the state, zero at the first iteration: no gradient at T = 1
            if kname == "model.injection.A_log" and cfg.T == 1:
                continue
            assert v.grad is not None and v.grad.abs().max() > 0, "parameter %s unused" % kname
        mf.write_config(os.path.join(d, "config.txt"), cfg, ref.CONFIG_KEYS)
        st.save(os.path.join(d, "weights.safetensors"), params)
        st.save(os.path.join(d, "input.safetensors"), OrderedDict(tokens=tokens))
        st.save(os.path.join(d, "expected.safetensors"), OrderedDict(logits=logits.to(torch.float32)))
        grads = OrderedDict(loss=loss.detach().to(torch.float32).reshape(()))
        for kname, v in p.items():
            grads[kname] = v.grad.to(torch.float32).contiguous()
        st.save(os.path.join(d, "grads.safetensors"), grads)
        print("  parcae/%-14s params %5d  loss %.5f  |logits| max %.3f" % (
            name, sum(v.numel() for v in params.values()), loss.item(), logits.abs().max().item()))


if __name__ == "__main__":
    main()
