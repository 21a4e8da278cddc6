#!/usr/bin/python3
"""Parity of `lrc forward` with the PyTorch reference on shapes no fixture has.

    /usr/bin/python3 tests/reference/random_parity.py LRC MODEL.lua SEED [TRIALS]

For every placement, draws TRIALS random configurations from SEED (odd widths,
head counts, FFN sizes and vocabularies; 1-4 layers; batch 1-3; length 1-11),
random non-default weights, runs lrc on them and compares its logits with the
f64 PyTorch answer: relative error at most 1e-5. Prints one line per case and,
last, `N passed, M failed`; exits non-zero on any failure.
"""

import os
import random
import subprocess
import sys
import tempfile
from collections import OrderedDict

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ref as ref  # noqa: E402
import make_fixtures as mf  # noqa: E402
import safetensors_io as st  # noqa: E402


def random_case(rng, norm):
    heads = rng.choice([1, 2, 3, 5, 7])
    head_dim = rng.choice([2, 4, 6, 10, 14, 18])  # RoPE pairs: even
    cfg = ref.Config(
        d_model=heads * head_dim, n_layers=rng.randint(1, 4), n_heads=heads,
        d_ff=rng.randint(3, 71), vocab=rng.randint(2, 131), norm=norm,
        eps=rng.choice([1e-6, 1e-5, 3e-3]), rope_base=rng.choice([10000.0, 500.0, 77.5]),
        layerrope_base=rng.choice([100.0, 10000.0, 13.0]),
        deepnet_depth_alpha=rng.randint(0, 1) if norm == "deepnet" else 0)
    return cfg, rng.randint(1, 3), rng.randint(1, 11)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    lrc, model, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    trials = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    rng = random.Random(seed)
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for norm in ref.PLACEMENTS:
            for trial in range(trials):
                cfg, B, T = random_case(rng, norm)
                g = torch.Generator().manual_seed(rng.randrange(1 << 30))
                params = mf.random_params(cfg, g)
                tokens = torch.randint(0, cfg.vocab, (B, T), generator=g, dtype=torch.int32)
                want = ref.forward(params, tokens, cfg)
                w, i, o = (os.path.join(tmp, n) for n in ("w.safetensors", "in.safetensors", "out.safetensors"))
                st.save(w, params)
                st.save(i, OrderedDict(tokens=tokens))
                sets = []
                for key in mf.CONFIG_KEYS:
                    v = getattr(cfg, key)
                    sets += ["--set", "%s=%s" % (key, repr(v) if isinstance(v, float) else v)]
                run = subprocess.run([lrc, "forward", model] + sets + ["--weights", w, "--input", i, "-o", o],
                                     capture_output=True, text=True)
                label = "%s d=%d L=%d H=%d ff=%d V=%d B=%d T=%d" % (
                    norm, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, cfg.vocab, B, T)
                if run.returncode != 0:
                    print("FAIL %s: lrc exited %d: %s" % (label, run.returncode, run.stderr.strip()))
                    failed += 1
                    continue
                got = st.load(o)[0]["logits"].to(torch.float64)
                rel = ((got - want).norm() / want.norm()).item()
                ok = got.shape == want.shape and rel <= 1e-5
                print("%s %s relative error %.2e" % ("ok  " if ok else "FAIL", label, rel))
                passed += ok
                failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
