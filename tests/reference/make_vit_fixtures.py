#!/usr/bin/python3
"""ViT parity fixtures: tests/fixtures/vit/<case>/ with config.txt, weights.safetensors
(random, every parameter away from its initial value), input.safetensors (images),
batch.safetensors (images and labels), expected.safetensors (logits) and
grads.safetensors (the loss and every parameter's gradient), all by vit_ref in f64 from
the exact f32 values stored.

    /usr/bin/python3 tests/reference/make_vit_fixtures.py [--out DIR]     (from the repository root)
"""

import os
import sys
from collections import OrderedDict

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402
import safetensors_io as st  # noqa: E402
import vit_ref as ref  # noqa: E402



def cases():
    out = []
    for norm in ("pre", "layerrope"):
        out.append(("%s_base" % norm, ref.Config(image_size=8, channels=2, patch=4, n_classes=5, d_model=16,
                                                 n_layers=2, n_heads=2, d_ff=24, norm=norm), 3))
        # odd sizes: 3 heads of 4, 3x3 patches of a 9x9 image, 7 classes, a label ignored
        out.append(("%s_odd" % norm, ref.Config(image_size=9, channels=1, patch=3, n_classes=7, d_model=12,
                                                n_layers=3, n_heads=3, d_ff=20, norm=norm, eps=1e-5), 2))
    return out


def random_params(cfg, g):
    p = OrderedDict()
    for name, shape in ref.param_shapes(cfg).items():
        t = torch.randn(tuple(shape), generator=g, dtype=torch.float32)
        if name.endswith(("_alpha", "_beta", "_alpha_rot", "_beta_rot")):
            t = t * 0.3
        elif name.endswith("gamma") or (name.endswith(".weight") and len(shape) == 1):
            t = 1.0 + 0.2 * t  # gains
        elif len(shape) == 1 or name.endswith(("cls_token", "position_embeddings")):
            t = 0.3 * t
        else:
            t = t * (1.0 / shape[-1] ** 0.5 if len(shape) == 2 else 0.2)
        p[name] = t.contiguous()
    return p


def main():
    root = os.path.join(mf.set_output_dir(sys.argv, "writes DIR/vit"), "vit")
    for name, cfg, B in cases():
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        g = mf.gen("vit/" + name)
        params = random_params(cfg, g)
        images = torch.randn(B, cfg.channels, cfg.image_size, cfg.image_size, generator=g, dtype=torch.float32)
        labels = torch.randint(0, cfg.n_classes, (B,), generator=g, dtype=torch.int64).to(torch.int32)
        if name.endswith("odd"):
            labels[-1] = -100
        p = OrderedDict((k, v.to(torch.float64).requires_grad_(True)) for k, v in params.items())
        logits = ref.forward(p, images, cfg)
        loss = ref.loss(logits, labels)
        loss.backward()
        for k, v in p.items():
            assert v.grad is not None and v.grad.abs().max() > 0, "parameter %s unused" % k
        mf.write_config(os.path.join(d, "config.txt"), cfg, ref.CONFIG_KEYS)
        st.save(os.path.join(d, "weights.safetensors"), params)
        st.save(os.path.join(d, "input.safetensors"), OrderedDict(images=images))
        st.save(os.path.join(d, "batch.safetensors"), OrderedDict(images=images, labels=labels))
        st.save(os.path.join(d, "expected.safetensors"), OrderedDict(logits=logits.detach().to(torch.float32)))
        grads = OrderedDict(loss=loss.detach().to(torch.float32).reshape(()))
        for k, v in p.items():
            grads[k] = v.grad.to(torch.float32).contiguous()
        st.save(os.path.join(d, "grads.safetensors"), grads)
        print("  vit/%-16s params %5d  loss %.5f  |logits| max %.3f" % (name, sum(v.numel() for v in params.values()),
                                                                         loss.item(), logits.abs().max().item()))


if __name__ == "__main__":
    main()
