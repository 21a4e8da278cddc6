#!/usr/bin/python3
"""Generate lrc's PyTorch parity fixtures.

    /usr/bin/python3 tests/reference/make_fixtures.py [--out DIR]     (from the repository root)

Writes (under DIR instead of tests/fixtures with --out)
  tests/fixtures/llama/<case>/{config.txt, weights.safetensors, input.safetensors,
                               expected.safetensors}
  tests/fixtures/ops/<op>_<k>.safetensors   (the ops beyond the first nine: op_fixtures.py)

Every random draw comes from a torch.Generator seeded from the case/file name (crc32, so
it does not depend on Python's salted hash or on the order cases are generated), so the
output is reproducible. Inputs and weights are drawn in f32, which is what is stored; the
expected outputs are computed from those exact values in f64 and rounded once to f32.
"""

import math
import os
import sys
import zlib
from collections import OrderedDict

import torch

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ref as ref  # noqa: E402
import op_fixtures  # noqa: E402
import safetensors_io as st  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")

CONFIG_KEYS = ("d_model", "n_layers", "n_heads", "d_ff", "vocab", "norm", "eps", "rope_base",
               "layerrope_alpha", "layerrope_beta", "layerrope_alpha_rot", "layerrope_beta_rot",
               "layerrope_base", "deepnet_depth_alpha")


def gen(name):
    return torch.Generator().manual_seed(zlib.crc32(name.encode("utf-8")))


def randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g, dtype=torch.float32) * scale


# --------------------------------------------------------------------------------------
# Model fixtures
# --------------------------------------------------------------------------------------

def model_cases():
    """(case name, Config, batch, seq_len) for every model fixture."""
    cases = []
    for norm in ref.PLACEMENTS:
        cases.append(("%s_base" % norm,
                      ref.Config(d_model=32, n_layers=3, n_heads=4, d_ff=48, vocab=61, norm=norm,
                                 eps=1e-6, rope_base=10000.0, layerrope_base=100.0), 2, 7))
        # Odd sizes: 3 heads (head_dim 12), d_ff and vocab prime, T not a power of two.
        cases.append(("%s_odd" % norm,
                      ref.Config(d_model=36, n_layers=2, n_heads=3, d_ff=37, vocab=53, norm=norm,
                                 eps=1e-5, rope_base=500.0, layerrope_base=100.0), 1, 9))
    # Depth-study flavour: base frequency 1e4 and its init slopes beta = beta_rot = 0.
    cases.append(("layerrope_b1e4",
                  ref.Config(d_model=32, n_layers=4, n_heads=2, d_ff=40, vocab=67, norm="layerrope",
                             eps=1e-6, rope_base=10000.0, layerrope_base=10000.0,
                             layerrope_beta=0.0, layerrope_beta_rot=0.0), 2, 5))
    cases.append(("deepnet_depthalpha",
                  ref.Config(d_model=32, n_layers=4, n_heads=4, d_ff=48, vocab=61, norm="deepnet",
                             eps=1e-6, rope_base=10000.0, layerrope_base=100.0,
                             deepnet_depth_alpha=1), 2, 7))
    return cases


def random_params(cfg, g):
    """Random, deliberately non-default values for every parameter (f32).

    Non-default so that a wrong name, a transposed matrix, a missing gain or a swapped
    norm weight changes the answer. Scales keep activations O(1): matrices ~0.6/sqrt(fan_in)
    (about 0.1 at these sizes), embeddings N(0, 1), the head 1/sqrt(d) so logits spread
    over a few units.
    """
    params = OrderedDict()
    for name, shape in ref.param_shapes(cfg).items():
        if name == "model.embed_tokens.weight":
            t = randn(g, *shape)
        elif name == "lm_head.weight":
            t = randn(g, *shape, scale=1.0 / math.sqrt(shape[1]))
        elif name.endswith("_gamma"):
            t = 1.0 + randn(g, *shape, scale=0.3)
        elif name.startswith("model.layerrope."):
            t = torch.rand(shape, generator=g, dtype=torch.float32) * 1.2 - 0.6
        elif len(shape) == 1:  # RMSNorm gains
            t = 1.0 + randn(g, *shape, scale=0.2)
        else:  # [out, in] projection matrices
            t = randn(g, *shape, scale=0.6 / math.sqrt(shape[1]))
        params[name] = t.contiguous()
    return params


def write_config(path, cfg, keys=CONFIG_KEYS):
    """config.txt: KEY=VALUE a line, the keys of a model's config in order."""
    with open(path, "w") as f:
        for key in keys:
            v = getattr(cfg, key)
            f.write("%s=%s\n" % (key, repr(v) if isinstance(v, float) else v))


def read_config(path):
    """Parse config.txt back (used to check it round-trips)."""
    kv = {}
    with open(path) as f:
        for line in f:
            k, v = line.rstrip("\n").split("=", 1)
            kv[k] = v
    fields = ref.Config.__dataclass_fields__
    out = {}
    for k, v in kv.items():
        typ = fields[k].type
        out[k] = v if typ in (str, "str") else (float(v) if typ in (float, "float") else int(v))
    return ref.Config(**out)


def check_all_params_used(params, tokens, cfg):
    """Every parameter must influence the logits; catches dead or misnamed parameters."""
    p = OrderedDict((k, v.to(torch.float64).requires_grad_(True)) for k, v in params.items())
    logits = ref.forward(p, tokens, cfg)
    probe = torch.randn(logits.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    (logits * probe).sum().backward()
    for k, v in p.items():
        assert v.grad is not None and v.grad.abs().max() > 0, "parameter %s unused" % k


def make_model_fixture(name, cfg, B, T):
    out_dir = os.path.join(FIXTURES, "llama", name)
    os.makedirs(out_dir, exist_ok=True)
    g = gen("llama/" + name)
    params = random_params(cfg, g)
    tokens = torch.randint(0, cfg.vocab, (B, T), generator=g, dtype=torch.int64).to(torch.int32)

    logits = ref.forward(params, tokens, cfg)  # f64
    check_all_params_used(params, tokens, cfg)
    # How far an f32 evaluation of the same math lands: a hint for test tolerances.
    f32_err = (_forward_dtype(params, tokens, cfg, torch.float32).to(torch.float64)
               - logits).abs().max().item()

    write_config(os.path.join(out_dir, "config.txt"), cfg)
    st.save(os.path.join(out_dir, "weights.safetensors"), params)
    st.save(os.path.join(out_dir, "input.safetensors"), OrderedDict(tokens=tokens))
    st.save(os.path.join(out_dir, "expected.safetensors"),
            OrderedDict(logits=logits.to(torch.float32)))

    # Read everything back and compare bit for bit.
    assert read_config(os.path.join(out_dir, "config.txt")) == cfg
    w, _ = st.load(os.path.join(out_dir, "weights.safetensors"))
    assert list(w) == list(params) and all(torch.equal(w[k], params[k]) for k in params)
    assert all(w[k].dtype == torch.float32 for k in w)
    i, _ = st.load(os.path.join(out_dir, "input.safetensors"))
    assert i["tokens"].dtype == torch.int32 and torch.equal(i["tokens"], tokens)
    e, _ = st.load(os.path.join(out_dir, "expected.safetensors"))
    assert torch.equal(e["logits"], logits.to(torch.float32))
    assert torch.equal(ref.forward(w, i["tokens"], cfg), logits)
    print("  llama/%-22s params %6d  |logits| max %6.3f std %5.3f  f32-vs-f64 max err %.1e"
          % (name, ref.param_count(cfg), logits.abs().max(), logits.std(), f32_err))


def _forward_dtype(p, tokens, cfg, dtype):
    """ref.forward's body, without its upcast: the same functional code in `dtype`."""
    q = {k: v.to(dtype) for k, v in p.items()}
    h = ref.embedding(tokens, q["model.embed_tokens.weight"])
    for l in range(cfg.n_layers):
        pre = "model.layers.%d." % l
        h = ref.half_step(h, lambda x: ref.attention(x, q, pre, cfg), l, 0, q, cfg)
        h = ref.half_step(h, lambda x: ref.mlp(x, q, pre), l, 1, q, cfg)
    h = ref.rms_normalize(h, cfg.eps) * q["model.norm.weight"]
    return ref.linear(h, q["lm_head.weight"])


# --------------------------------------------------------------------------------------
# Per-op fixtures
# --------------------------------------------------------------------------------------

def save_op(fname, op, inputs, out, attrs=None):
    """inputs: list of f32/i32 tensors (the exact stored values); out: f64 result, or
    integer (topk's ids), stored i32 and compared exactly."""
    path = os.path.join(FIXTURES, "ops", fname + ".safetensors")
    tensors = OrderedDict(("in%d" % k, t.contiguous()) for k, t in enumerate(inputs))
    integer = not out.dtype.is_floating_point
    tensors["out"] = out.to(torch.int32 if integer else torch.float32).contiguous()
    meta = OrderedDict(op=op)
    meta.update(attrs or {})
    st.save(path, tensors, meta)
    back, m = st.load(path)
    assert m == dict(meta) and list(back) == list(tensors)
    assert all(back[k].dtype == tensors[k].dtype and back[k].numpy().tobytes() == tensors[k].numpy().tobytes() for k in tensors)
    print("  ops/%-16s %-14s out %s %s" % (fname, op, list(out.shape), dict(attrs or {})))


def f64(t):
    return t.to(torch.float64)


def make_op_fixtures():
    os.makedirs(os.path.join(FIXTURES, "ops"), exist_ok=True)

    for k, (M, K, N) in enumerate([(5, 7, 3), (13, 33, 17)]):
        g = gen("ops/matmul_%d" % k)
        x, w = randn(g, M, K), randn(g, N, K)
        save_op("matmul_%d" % k, "matmul", [x, w], ref.linear(f64(x), f64(w)))

    g = gen("ops/embedding_0")
    w = randn(g, 11, 5)
    ids = torch.randint(0, 11, (3, 4), generator=g, dtype=torch.int64).to(torch.int32)
    save_op("embedding_0", "embedding", [ids, w], ref.embedding(ids, f64(w)))

    for k, (shape, eps) in enumerate([((3, 4, 10), 1e-6), ((2, 7), 1e-2)]):
        g = gen("ops/rmsnorm_%d" % k)
        # Second case: small values so eps (1e-2) visibly matters.
        x = randn(g, *shape, scale=1.0 if k == 0 else 0.1)
        save_op("rmsnorm_%d" % k, "rmsnorm", [x], ref.rms_normalize(f64(x), eps),
                {"eps": repr(eps)})

    g = gen("ops/silu_0")
    x = randn(g, 5, 9, scale=3.0)
    save_op("silu_0", "silu", [x], ref.silu(f64(x)))

    g = gen("ops/softmax_0")
    x = randn(g, 4, 13, scale=20.0)
    save_op("softmax_0", "softmax", [x], ref.softmax(f64(x)))

    for k, (shape, base) in enumerate([((2, 6, 3, 8), 10000.0), ((1, 11, 2, 14), 500.0)]):
        g = gen("ops/rope_%d" % k)
        x = randn(g, *shape)
        save_op("rope_%d" % k, "rope", [x], ref.rope(f64(x), base), {"base": repr(base)})

    for k, shape in enumerate([(2, 5, 3, 4), (1, 9, 2, 6)]):
        g = gen("ops/attention_%d" % k)
        q, kk, v = randn(g, *shape), randn(g, *shape), randn(g, *shape)
        scale = 1.0 / math.sqrt(shape[-1])
        save_op("attention_%d" % k, "attention", [q, kk, v],
                ref.attention_core(f64(q), f64(kk), f64(v), scale, causal=True),
                {"causal": "1", "scale": repr(scale)})

    for k, (d, layer, base) in enumerate([(10, 0, 100.0), (16, 5, 100.0), (8, 37, 10000.0)]):
        g = gen("ops/depth_gain_%d" % k)
        gamma = 1.0 + randn(g, d, scale=0.3)
        scalars = [torch.rand((), generator=g, dtype=torch.float32) * 1.2 - 0.6 for _ in range(4)]
        out = ref.depth_gain(f64(gamma), *[f64(s) for s in scalars], layer, base)
        save_op("depth_gain_%d" % k, "depth_gain", [gamma] + scalars, out,
                {"layer": str(layer), "base": repr(base)})

    g = gen("ops/cross_entropy_0")
    logits = randn(g, 6, 9, scale=2.0)
    labels = torch.randint(0, 9, (6,), generator=g, dtype=torch.int64)
    labels[[1, 4]] = -100
    labels = labels.to(torch.int32)
    out = ref.cross_entropy(f64(logits), labels)
    ref_torch = torch.nn.functional.cross_entropy(f64(logits), labels.long(), ignore_index=-100)
    assert abs(out - ref_torch) < 1e-12
    save_op("cross_entropy_0", "cross_entropy", [logits, labels], out)

    # every other op that can be a one-op graph (and non-causal attention)
    op_fixtures.make_more(save_op, gen, randn)


def set_output_dir(argv, what):
    """`--out DIR`: write under DIR instead of tests/fixtures (tests/reference/check_fixtures.sh
    regenerates into a temporary directory and compares). Returns the fixtures root."""
    global FIXTURES
    if len(argv) == 3 and argv[1] == "--out":
        FIXTURES = os.path.abspath(argv[2])
    elif len(argv) != 1:
        sys.exit("usage: %s [--out DIR]   (%s; default %s)" % (argv[0], what, FIXTURES))
    return FIXTURES


def main():
    set_output_dir(sys.argv, "writes DIR/llama and DIR/ops")
    torch.manual_seed(0)  # nothing should use the global RNG; fixed anyway
    print("model fixtures:")
    for name, cfg, B, T in model_cases():
        make_model_fixture(name, cfg, B, T)
    print("op fixtures:")
    make_op_fixtures()
    total = 0
    for root, _, files in os.walk(FIXTURES):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print("total fixture size: %d bytes" % total)


if __name__ == "__main__":
    main()
