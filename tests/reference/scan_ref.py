"""scan_ref.py WEIGHTS INPUT OUT — tests/cli/scan.lua in PyTorch, in f64, each
scan a python loop: the logits of INPUT's tokens and, for the next-token loss
that `lrc backward` takes by default (the tokens shifted left, the last
position ignored), the loss and every parameter's gradient, written to OUT
(f32). The loading and writing are along_ref.py's."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import along_ref  # noqa: E402


def scan(a, b, axis, init=None, reverse=False):
    """h_t = a_t h_{t-1} + b_t along axis, h_{-1} = init or 0; from the end with reverse"""
    T = a.shape[axis]
    h = init if init is not None else torch.zeros_like(a.select(axis, 0))
    hs = {}
    for t in (reversed(range(T)) if reverse else range(T)):
        h = a.select(axis, t) * h + b.select(axis, t)
        hs[t] = h
    return torch.stack([hs[t] for t in range(T)], axis)


def forward(w, tokens):
    lin = lambda name, v: v @ w[name + ".weight"].T  # noqa: E731
    x = w["embed.weight"][tokens]
    z, u = lin("decay", x), lin("in", x)
    h = scan(torch.sigmoid(z), torch.sigmoid(-z) * u, 1)
    r = scan(torch.sigmoid(u), x, 1, init=x.mean(1), reverse=True)
    f = scan(torch.tanh(x), u, 2)
    return lin("head", h * torch.nn.functional.silu(x) + r + f)


if __name__ == "__main__":
    along_ref.forward = forward
    along_ref.main()
