"""along_ref.py WEIGHTS INPUT OUT — tests/cli/along.lua in PyTorch, in f64: the
logits of INPUT's tokens and, for the next-token loss that `lrc backward`
takes by default (the tokens shifted left, the last position ignored), the
loss and every parameter's gradient, written to OUT (f32)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import st  # noqa: E402


def load(path):
    out = {}
    for name, (dtype, shape, a) in st.arrays(path).items():
        t = torch.tensor(list(a), dtype=torch.float64 if dtype == "F32" else torch.int64)
        out[name] = t.reshape(shape)
    return out


def forward(w, tokens):
    x = w["embed.weight"][tokens]
    B, T, d = x.shape
    s = x.sum(1, keepdim=True)
    m = x.mean(-1, keepdim=True)
    a = x.amax(0, keepdim=True)
    lse = torch.logsumexp(x, 1, keepdim=True)
    p = x.mean(2).amax(1)
    g = x.sum()
    ga = x.amax(dim=(0, 1, 2), keepdim=True)
    u = torch.cat([torch.softmax(x, 1), x.cumsum(1), (s + lse + g).expand(-1, T, -1)], -1)
    rev = x.flip(-1).cumsum(-1).flip(-1)
    stk = torch.stack([rev, m.expand(B, T, d) * p.reshape(B, 1, 1).expand(B, T, d), (a * ga).expand(B, T, d)], 2)
    h = torch.cat([u, stk.reshape(B, T, 3 * d)], 2)
    return h @ w["head.weight"].T


def main():
    w, tokens = load(sys.argv[1]), load(sys.argv[2])["tokens"]
    for t in w.values():
        t.requires_grad_(True)
    logits = forward(w, tokens)
    labels = torch.cat([tokens[:, 1:], torch.full((tokens.shape[0], 1), -100)], 1)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach()}
    out.update({k: v.grad for k, v in w.items()})
    ts = {k: ["F32", list(v.shape), v.to(torch.float32).contiguous().numpy().tobytes()] for k, v in out.items()}
    st.pack(sys.argv[3], ts)


if __name__ == "__main__":
    main()
