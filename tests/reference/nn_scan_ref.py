"""nn_scan_ref.py WEIGHTS INPUT OUT — tests/cli/nn_scan.lua in PyTorch, in
f64: the delta rule as a python loop over t. The logits (and loss and
gradients, which lrc does not take through nn.scan yet) are written as
along_ref.py writes them (its loading and writing)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import along_ref  # noqa: E402


def forward(w, tokens):
    lin = lambda name, v: v @ w[name + ".weight"].T  # noqa: E731
    B, T = tokens.shape
    x = w["embed.weight"][tokens]
    q, k, v, beta = lin("q", x), lin("k", x), lin("v", x), torch.sigmoid(lin("beta", x))
    dk = q.shape[-1]
    S = torch.zeros(B, dk, dk, dtype=torch.float64)
    ys = []
    for t in range(T):
        kt = k[:, t].unsqueeze(2)
        S = S + (v[:, t].unsqueeze(2) - S @ kt) * beta[:, t].reshape(B, 1, 1) @ kt.transpose(1, 2)
        ys.append((S @ q[:, t].unsqueeze(2)).squeeze(2))
    return lin("head", torch.stack(ys, 1))


if __name__ == "__main__":
    along_ref.forward = forward
    along_ref.main()
