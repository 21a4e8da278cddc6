#!/usr/bin/python3
"""Gradient fixtures: for every model fixture in tests/fixtures/llama/<case>/,
the next-token loss (labels = tokens shifted left, the last position unused)
and its gradient with respect to every parameter, by PyTorch autograd in f64
on the exact f32 weights, written as grads.safetensors (F32: 'loss' and one
tensor per parameter, named as the parameter).

    /usr/bin/python3 tests/reference/make_grad_fixtures.py [--out DIR]     (from the repository root)
"""

import os
import sys
from collections import OrderedDict

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ref as ref  # noqa: E402
import make_fixtures as mf  # noqa: E402
import safetensors_io as st  # noqa: E402


def main():
    root = os.path.join(mf.set_output_dir(sys.argv, "reads and writes DIR/llama"), "llama")
    for case in sorted(os.listdir(root)):
        d = os.path.join(root, case)
        cfg = mf.read_config(os.path.join(d, "config.txt"))
        w, _ = st.load(os.path.join(d, "weights.safetensors"))
        tokens = st.load(os.path.join(d, "input.safetensors"))[0]["tokens"]
        p = OrderedDict((k, v.to(torch.float64).requires_grad_(True)) for k, v in w.items())
        loss = ref.next_token_loss(ref.forward(p, tokens, cfg), tokens)
        loss.backward()
        out = OrderedDict(loss=loss.detach().to(torch.float32).reshape(()))
        for k, v in p.items():
            out[k] = v.grad.to(torch.float32).contiguous()
        st.save(os.path.join(d, "grads.safetensors"), out)
        print("  llama/%-22s loss %.6f  |grad| max %.3e" % (case, loss.item(), max(v.grad.abs().max().item() for v in p.values())))


if __name__ == "__main__":
    main()
