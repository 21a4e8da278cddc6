"""products_ref.py WEIGHTS INPUT OUT — tests/cli/products.lua in PyTorch, in
f64: bmm as torch.matmul, cast and arange as .to and torch.arange, the i32
slice as a shift with a 0 first. The logits, loss and gradients are written
as along_ref.py writes them (its loading and writing)."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import along_ref  # noqa: E402


def forward(w, tokens):
    lin = lambda name, v: v @ w[name + ".weight"].T  # noqa: E731
    B, T = tokens.shape
    d, H = w["embed.weight"].shape[1], 2
    prev = torch.cat([torch.zeros(B, 1, dtype=tokens.dtype), tokens[:, :-1]], 1)
    x = w["embed.weight"][tokens] + w["prev.weight"][prev]
    pos = torch.arange(T, dtype=torch.int32).to(torch.float64)
    x = x + pos.reshape(T, 1) * 0.1
    heads = lambda v: v.reshape(B, T, H, d // H).transpose(1, 2)  # noqa: E731
    q, k, v = heads(lin("q", x)), heads(lin("k", x)), heads(lin("v", x))
    mask = (pos > pos.reshape(T, 1)).to(torch.float64) * -1e9
    s = torch.matmul(q, k.transpose(2, 3)) * (1 / math.sqrt(d // H)) + mask
    y = torch.matmul(torch.softmax(s, -1), v).transpose(1, 2).reshape(B, T, d)
    y = y + torch.matmul(x, w["mix"])
    return lin("head", y)


if __name__ == "__main__":
    along_ref.forward = forward
    along_ref.main()
