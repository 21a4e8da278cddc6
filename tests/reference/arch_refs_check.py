#!/usr/bin/python3
"""arch_refs_check.py ARCH_DIR (ctest arch_refs): the two paper references of
tests/fixtures/arch hold, and their committed fixtures are what they compute.

1. diff_attn_ref.check() and mla_ref.check(): each reference against an independent
   form of itself (the paper's per-head equations; MLA's absorbed latent form) and
   causality.
2. ARCH_DIR/diff_attn and ARCH_DIR/mla recomputed from their config.json,
   weights.safetensors and input.safetensors in f64: logits, loss and every
   parameter's gradient against the committed F32 files, within 2e-7 of each tensor's
   largest magnitude (here they regenerate byte-identical; another BLAS can flip an
   f32 rounding, as tests/reference/check_fixtures.sh explains). So a change of a
   reference that is not followed by `make_arch_fixtures.py --only diff_attn,mla`
   fails here, without transformers.
"""

import os
import sys

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diff_attn_ref  # noqa: E402
import mla_ref  # noqa: E402
import safetensors_io as st  # noqa: E402

TOL = 2e-7


def close(name, got, want):
    got = got.detach().to(torch.float32).to(torch.float64)
    want = want.to(torch.float64)
    if got.shape != want.shape:
        sys.exit("%s: shape %s, committed %s" % (name, list(got.shape), list(want.shape)))
    err = float((got - want).abs().max())
    scale = float(want.abs().max())
    if not err <= TOL * scale:
        sys.exit("%s: differs from the committed fixture by %.3g (largest magnitude %.3g)" % (name, err, scale))
    return err / scale if scale > 0 else 0.0


def check_fixture(ref, d):
    model = ref.from_dir(d).double()
    inp, _ = st.load(os.path.join(d, "input.safetensors"))
    exp, _ = st.load(os.path.join(d, "expected.safetensors"))
    grads, _ = st.load(os.path.join(d, "grads.safetensors"))
    tokens = inp["tokens"].long()
    logits = model(tokens)
    loss = ref.next_token_loss(logits, tokens)
    loss.backward()
    worst = max(close("logits", logits, exp["logits"]), close("loss", loss, grads["loss"]))
    params = dict(model.named_parameters())
    if set(grads) - {"loss"} != set(params):
        sys.exit("%s: gradients of %s, parameters %s" % (d, sorted(set(grads) - {"loss"}), sorted(params)))
    for name, p in params.items():
        worst = max(worst, close(name, p.grad, grads[name]))
    print("arch/%s: logits, loss and %d gradients within %.1e (relative to each tensor's max)"
          % (os.path.basename(d), len(params), worst))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: arch_refs_check.py ARCH_DIR")
    torch.set_num_threads(1)
    diff_attn_ref.check()
    mla_ref.check()
    check_fixture(diff_attn_ref, os.path.join(sys.argv[1], "diff_attn"))
    check_fixture(mla_ref, os.path.join(sys.argv[1], "mla"))


if __name__ == "__main__":
    main()
