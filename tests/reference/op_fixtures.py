"""Op fixtures for every op of ir/lrc_ir.h that can run alone as a one-op graph, beyond
the nine of make_fixtures.make_op_fixtures (which calls make_more). Written the same
way: inputs drawn in f32 (the stored values), the expected output computed from them
in f64 by PyTorch and rounded once to f32; attributes as strings in the metadata under
their op-table names (ir/ops.c), list attributes (reshape's shape, transpose's perm,
sum_to's shape) as comma-separated integers.

Gradient ops are computed by torch.autograd in f64 from the definition of the forward
op (llama_ref's functions or torch.nn.functional), never from lrc's gradient formulas.

Ops with no fixture, because a one-op graph of them means nothing:
  input, param, state    sources: no computation (state is exercised below as the KV
                         caches of kv_attention, and by ctest decode)
  loop_state, loop_next  a loop region needs both and a body between them (loop_next's
                         first input must be the loop_state; the executors run the back
                         edge themselves): exercised by ctest loop, parity_parcae_* and
                         grads_parcae_*.
"""

import math

import torch
import torch.nn.functional as F

import llama_ref as ref


def f64(t):
    return t.to(torch.float64)


def lst(xs):
    return ",".join(str(int(x)) for x in xs)


def vjp(fn, inputs, which, dy):
    """d(sum(fn(*inputs) * dy)) / d inputs[which], by autograd in f64."""
    xs = [f64(t).requires_grad_(k == which) for k, t in enumerate(inputs)]
    out = fn(*xs)
    (g,) = torch.autograd.grad(out, xs[which], grad_outputs=f64(dy))
    return g


def elementwise(save, gen, randn):
    # add/mul: broadcasting on both sides, and a lower-rank operand (trailing alignment)
    for op in ("add", "mul"):
        for k, (sa, sb) in enumerate([((3, 1, 5), (4, 1)), ((2, 3, 4), (4,)), ((1,), (2, 3))]):
            g = gen("ops/%s_%d" % (op, k))
            a, b = randn(g, *sa), randn(g, *sb)
            out = f64(a) + f64(b) if op == "add" else f64(a) * f64(b)
            save("%s_%d" % (op, k), op, [a, b], out)

    g = gen("ops/scale_0")
    x = randn(g, 4, 6)
    save("scale_0", "scale", [x], f64(x) * -0.37, {"s": repr(-0.37)})

    g = gen("ops/gelu_0")
    x = randn(g, 5, 9, scale=3.0)
    save("gelu_0", "gelu", [x], F.gelu(f64(x)))  # the exact (erf) GELU, torch's default

    # tanh, sigmoid: saturation (+-30, and sigmoid's e^-|x| far below f32's
    # normal range at -100), values near 0, the cpu tanh's 0.625 switch
    special = [0.0, -0.0, 1e-4, -1e-4, 1e-30, 30.0, -30.0, 9.0, -9.0, 0.6249, 0.6251, -0.625, 100.0, -100.0]
    for op, fn in (("tanh", torch.tanh), ("sigmoid", torch.sigmoid)):
        g = gen("ops/%s_0" % op)
        x = randn(g, 4, 9, scale=3.0)
        x.view(-1)[:len(special)] = torch.tensor(special)
        save("%s_0" % op, op, [x], fn(f64(x)))

    # gelu_tanh (GPT-2's and Gemma's): torch's gelu(approximate="tanh"); the
    # negative tail (outputs near 0, where 1 + tanh u cancels) and values near
    # 0 in a fixture of their own, with no large positive x (gelu_tanh(x) ~ x)
    # to swamp the relative norm
    gelu_tanh = lambda t: F.gelu(t, approximate="tanh")  # noqa: E731
    g = gen("ops/gelu_tanh_0")
    x = randn(g, 5, 9, scale=3.0)
    save("gelu_tanh_0", "gelu_tanh", [x], gelu_tanh(f64(x)))
    g = gen("ops/gelu_tanh_1")
    x = randn(g, 3, 7)
    tail = [0.0, -0.0, 1e-4, -1e-4, 1e-30, 0.6249, -0.625, -2.0, -3.0, -4.0, -5.0, -7.0, -10.0, -30.0, -100.0]
    x.view(-1)[:len(tail)] = torch.tensor(tail)
    save("gelu_tanh_1", "gelu_tanh", [x], gelu_tanh(f64(x)))

    g = gen("ops/relu_0")
    x = randn(g, 4, 7)
    x[0, :3] = 0.0  # relu and relu_grad at exactly 0
    save("relu_0", "relu", [x], torch.relu(f64(x)))

    g = gen("ops/exp_0")
    x = randn(g, 3, 8, scale=2.0)
    save("exp_0", "exp", [x], torch.exp(f64(x)))

    g = gen("ops/softplus_0")
    x = randn(g, 4, 9, scale=8.0)  # both far tails: overflow-free form matters
    save("softplus_0", "softplus", [x], F.softplus(f64(x), threshold=40.0))

    for k, (shape, eps, scale) in enumerate([((3, 4, 10), 1e-5, 1.0), ((2, 7), 1e-2, 0.1)]):
        g = gen("ops/layernorm_%d" % k)
        x = randn(g, *shape, scale=scale) + 0.5  # a nonzero mean to subtract
        save("layernorm_%d" % k, "layernorm", [x], F.layer_norm(f64(x), (shape[-1],), eps=eps),
             {"eps": repr(eps)})


def layout(save, gen, randn):
    g = gen("ops/reshape_0")
    x = randn(g, 2, 3, 4)
    save("reshape_0", "reshape", [x], f64(x).reshape(3, 4, 2), {"shape": "3,-1,2"})

    for k, (shape, perm) in enumerate([((2, 3, 4, 5), (0, 2, 1, 3)), ((2, 3, 4), (2, 0, 1))]):
        g = gen("ops/transpose_%d" % k)
        x = randn(g, *shape)
        save("transpose_%d" % k, "transpose", [x], f64(x).permute(*perm), {"perm": lst(perm)})

    # slice: a narrowing; zeros before (start < 0); zeros after (start + size > length)
    for k, (shape, axis, start, size) in enumerate([((3, 7, 2), 1, 2, 3), ((4, 5), 0, -2, 5),
                                                    ((2, 3, 6), 2, 3, 6)]):
        g = gen("ops/slice_%d" % k)
        x = randn(g, *shape)
        pad = [0, 0] * len(shape)  # F.pad order: last axis first, (before, after)
        lo, hi = max(0, -start), max(0, start + size - shape[axis])
        pad[2 * (len(shape) - 1 - axis)], pad[2 * (len(shape) - 1 - axis) + 1] = lo, hi
        out = F.pad(f64(x), pad).narrow(axis, start + lo, size)
        save("slice_%d" % k, "slice", [x], out, {"axis": str(axis), "start": str(start), "size": str(size)})

    # sum_to: the gradient of a broadcast operand (leading axes dropped, size-1 axes summed)
    for k, (shape, to) in enumerate([((2, 3, 4, 5), (3, 1, 5)), ((4, 6), (1, 6)), ((3, 4), ())]):
        g = gen("ops/sum_to_%d" % k)
        x = randn(g, *shape)
        out = vjp(lambda b: b.expand(*shape), [torch.zeros(to)], 0, x)
        save("sum_to_%d" % k, "sum_to", [x], out, {"shape": lst(to)})


def kv_attention(q, k, v, pos, t_max, scale, base, window=0, softcap=0.0):
    """Decoding with a cache that holds zeros before pos (a compiled target's caches start
    at zero): RoPE at positions pos.., k and v written into rows pos.., query t attends to
    cache rows [0, pos + t] (the zero rows before pos included), or with a window only to
    rows j > pos + t - window (absolute positions); k, v and the caches may have fewer heads
    than q (GQA), and the scores a soft-cap."""
    B, T, H, D = q.shape
    Hkv = k.shape[2]
    half = D // 2
    i = torch.arange(half, dtype=torch.float64)
    ang = (pos + torch.arange(T, dtype=torch.float64))[:, None] * float(base) ** (-2.0 * i / D)
    cos, sin = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]

    def rot(x):
        return torch.cat([x[..., :half] * cos - x[..., half:] * sin, x[..., half:] * cos + x[..., :half] * sin], -1)

    kc = torch.zeros(B, t_max, Hkv, D, dtype=torch.float64)
    vc = torch.zeros(B, t_max, Hkv, D, dtype=torch.float64)
    kc[:, pos:pos + T], vc[:, pos:pos + T] = rot(k), v
    kc, vc = kc.repeat_interleave(H // Hkv, dim=2), vc.repeat_interleave(H // Hkv, dim=2)
    s = torch.einsum("bthd,bshd->bhts", rot(q), kc) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    at = pos + torch.arange(T)[:, None]
    allowed = torch.arange(t_max)[None, :] <= at
    if window:
        allowed &= torch.arange(t_max)[None, :] > at - window
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    return torch.einsum("bhts,bshd->bthd", p, vc)


def masked_scores(q, k, scale, causal, window=0, softcap=0.0):
    """[B, H, T, T] scores of q against k of Hkv heads dividing q's H (repeat_interleave on the
    head axis: transformers' repeat_kv), gemma2's soft-cap softcap * tanh(s / softcap), then -inf
    where the key is hidden: after the query (causal) or, with a sliding window (transformers
    4.44 Mistral/Gemma2), when j <= t - window."""
    T, G = q.shape[1], q.shape[2] // k.shape[2]
    s = torch.einsum("bthd,bshd->bhts", q, k.repeat_interleave(G, dim=2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    t = torch.arange(T)
    hide = torch.zeros(T, T, dtype=torch.bool)
    if causal:
        hide |= t[None, :] > t[:, None]
    if window:
        hide |= t[None, :] <= t[:, None] - window
    return s.masked_fill(hide, float("-inf"))


def attention_ext(q, k, v, scale, causal, window=0, softcap=0.0):
    """attention_core over masked_scores: GQA, a sliding window and the soft-cap."""
    G = q.shape[2] // k.shape[2]
    p = torch.softmax(masked_scores(q, k, scale, causal, window, softcap), dim=-1)
    return torch.einsum("bhts,bshd->bthd", p, v.repeat_interleave(G, dim=2))


def attention_lse(q, k, v, scale, causal, window=0, softcap=0.0):
    """Each query row's log-sum-exp of the masked scores, [B, T, H] (lrc's attention_lse: the
    statistic its attention_grad reads)."""
    return torch.logsumexp(masked_scores(q, k, scale, causal, window, softcap), dim=-1).permute(0, 2, 1)


def saved_stats(q, k, v, scale, causal, window=0, softcap=0.0):
    """attention_grad's inputs y and lse: the forward's output and log-sum-exp, as stored (f32)."""
    args = (f64(q), f64(k), f64(v), scale, causal, window, softcap)
    return [attention_ext(*args).to(torch.float32), attention_lse(*args).to(torch.float32)]


# (B, T, H, Hkv, Dh, causal, window, softcap, q's scale): GQA, MQA, a window, the soft-cap, all three
ATTENTION_FEATURES = [(1, 7, 6, 2, 8, 1, 0, 0.0, 1.0), (2, 7, 3, 1, 8, 0, 0, 0.0, 1.0), (2, 7, 2, 2, 8, 1, 3, 0.0, 1.0),
                      (1, 7, 2, 2, 8, 1, 0, 5.0, 3.0), (2, 7, 6, 2, 8, 1, 3, 5.0, 3.0)]


def attention_features(save, gen, randn):
    for c, (B, T, H, Hkv, D, causal, window, cap, qs) in enumerate(ATTENTION_FEATURES):
        scale = 1.0 / math.sqrt(D)
        attrs = {"causal": str(causal), "scale": repr(scale), "window": str(window), "softcap": repr(cap)}
        name = "attention_%d" % (4 + c)
        g = gen("ops/" + name)
        q, kk, v = randn(g, B, T, H, D, scale=qs), randn(g, B, T, Hkv, D), randn(g, B, T, Hkv, D)
        save(name, "attention", [q, kk, v], attention_ext(f64(q), f64(kk), f64(v), scale, causal, window, cap), attrs)
        name = "attention_lse_%d" % c
        g = gen("ops/" + name)
        q, kk, v = randn(g, B, T, H, D, scale=qs), randn(g, B, T, Hkv, D), randn(g, B, T, Hkv, D)
        save(name, "attention_lse", [q, kk, v], attention_lse(f64(q), f64(kk), f64(v), scale, causal, window, cap), attrs)
        for which in range(3):
            name = "attention_grad_%d" % (6 + 3 * c + which)
            g = gen("ops/" + name)
            q, kk, v = randn(g, B, T, H, D, scale=qs), randn(g, B, T, Hkv, D), randn(g, B, T, Hkv, D)
            dy = randn(g, B, T, H, D)
            out = vjp(lambda a, b, cc: attention_ext(a, b, cc, scale, causal, window, cap), [q, kk, v], which, dy)
            stats = saved_stats(q, kk, v, scale, causal, window, cap)
            save(name, "attention_grad", [q, kk, v, dy] + stats, out, dict(attrs, which=str(which)))


def attention(save, gen, randn):
    for k, shape in enumerate([(2, 5, 3, 4), (1, 7, 2, 6)]):
        name = "attention_%d" % (k + 2)  # attention_0/1 (causal) are make_op_fixtures'
        g = gen("ops/" + name)
        q, kk, v = randn(g, *shape), randn(g, *shape), randn(g, *shape)
        scale = 1.0 / math.sqrt(shape[-1])
        save(name, "attention", [q, kk, v], ref.attention_core(f64(q), f64(kk), f64(v), scale, causal=False),
             {"causal": "0", "scale": repr(scale)})

    for k, (B, T, H, D, t_max, pos, base) in enumerate([(2, 3, 2, 4, 7, 2, 10000.0), (1, 1, 3, 6, 5, 4, 500.0)]):
        g = gen("ops/kv_attention_%d" % k)
        q, kk, v = randn(g, B, T, H, D), randn(g, B, T, H, D), randn(g, B, T, H, D)
        cache = torch.zeros(B, t_max, H, D)
        scale = 1.0 / math.sqrt(D)
        out = kv_attention(f64(q), f64(kk), f64(v), pos, t_max, scale, base)
        save("kv_attention_%d" % k, "kv_attention", [q, kk, v, cache, cache.clone(), torch.tensor([pos], dtype=torch.int32)],
             out, {"scale": repr(scale), "base": repr(base)})

    # GQA (6 heads over 2, and MQA's 1) with a window of absolute positions and the soft-cap
    for k, (B, T, H, Hkv, D, t_max, pos, window, cap) in enumerate([(2, 2, 6, 2, 8, 8, 4, 3, 5.0), (1, 3, 4, 1, 8, 9, 5, 2, 0.0)]):
        name = "kv_attention_%d" % (k + 2)
        g = gen("ops/" + name)
        q, kk, v = randn(g, B, T, H, D, scale=3.0), randn(g, B, T, Hkv, D), randn(g, B, T, Hkv, D)
        cache = torch.zeros(B, t_max, Hkv, D)
        scale = 1.0 / math.sqrt(D)
        out = kv_attention(f64(q), f64(kk), f64(v), pos, t_max, scale, base, window, cap)
        save(name, "kv_attention", [q, kk, v, cache, cache.clone(), torch.tensor([pos], dtype=torch.int32)],
             out, {"scale": repr(scale), "base": repr(base), "window": str(window), "softcap": repr(cap)})


def matmul_grads(save, gen, randn):
    g = gen("ops/matmul_nn_0")
    dy, w = randn(g, 2, 3, 5), randn(g, 5, 7)
    save("matmul_nn_0", "matmul_nn", [dy, w], vjp(ref.linear, [torch.zeros(2, 3, 7), w], 0, dy))

    g = gen("ops/matmul_tn_0")
    dy, x = randn(g, 2, 4, 3), randn(g, 2, 4, 6)
    save("matmul_tn_0", "matmul_tn", [dy, x], vjp(ref.linear, [x, torch.zeros(3, 6)], 1, dy))

    g = gen("ops/embedding_grad_0")
    ids = torch.randint(0, 11, (3, 4), generator=g, dtype=torch.int64).to(torch.int32)
    ids[0, 0] = ids[2, 3] = ids[1, 1]  # repeated ids: their rows must be summed
    dy = randn(g, 3, 4, 5)
    save("embedding_grad_0", "embedding_grad", [ids, dy],
         vjp(lambda w: ref.embedding(ids, w), [torch.zeros(11, 5)], 0, dy), {"vocab": "11"})


def unary_grads(save, gen, randn):
    """x, dy -> dx of the forward op at x."""
    cases = [("rmsnorm_grad", lambda x: ref.rms_normalize(x, 1e-2), (3, 9), 0.3, {"eps": repr(1e-2)}),
             ("silu_grad", ref.silu, (4, 7), 3.0, {}),
             ("softmax_grad", None, (3, 11), 3.0, {}),
             ("layernorm_grad", lambda x: F.layer_norm(x, (8,), eps=1e-5), (2, 3, 8), 1.0, {"eps": repr(1e-5)}),
             ("gelu_grad", F.gelu, (5, 6), 3.0, {}),
             ("relu_grad", torch.relu, (4, 7), 1.0, {}),
             ("gelu_tanh_grad", lambda x: F.gelu(x, approximate="tanh"), (5, 6), 3.0, {}),
             ("tanh_grad", torch.tanh, (4, 9), 3.0, {}),
             ("sigmoid_grad", torch.sigmoid, (4, 9), 3.0, {})]
    for op, fn, shape, scale, attrs in cases:
        g = gen("ops/%s_0" % op)
        x, dy = randn(g, *shape, scale=scale), randn(g, *shape)
        if op == "relu_grad":
            x[0, :3] = 0.0  # torch's (and lrc's) rule: no gradient at 0
        if op in ("gelu_tanh_grad", "tanh_grad", "sigmoid_grad"):  # saturation, and near 0
            x.view(-1)[:6] = torch.tensor([0.0, 1e-4, -1e-4, 30.0, -30.0, -6.0])
        if op in ("tanh_grad", "sigmoid_grad"):  # from the forward output y, as torch's tanh_backward
            save("%s_0" % op, op, [fn(f64(x)).to(torch.float32), dy], vjp(fn, [x], 0, dy), attrs)
            continue
        if op == "softmax_grad":  # the op takes the softmax's output y, not its input
            y = ref.softmax(f64(x))
            save("softmax_grad_0", op, [y.to(torch.float32), dy], vjp(ref.softmax, [x], 0, dy), attrs)
            continue
        save("%s_0" % op, op, [x, dy], vjp(fn, [x], 0, dy), attrs)

    for k, (shape, base) in enumerate([((2, 6, 3, 8), 10000.0), ((1, 5, 2, 10), 500.0)]):
        g = gen("ops/rope_grad_%d" % k)
        dy = randn(g, *shape)
        save("rope_grad_%d" % k, "rope_grad", [dy], vjp(lambda x: ref.rope(x, base), [torch.zeros(shape)], 0, dy),
             {"base": repr(base)})

    for k, shape in enumerate([(6, 9), (2, 3, 7)]):
        g = gen("ops/cross_entropy_grad_%d" % k)
        logits = randn(g, *shape, scale=2.0)
        labels = torch.randint(0, shape[-1], shape[:-1], generator=g, dtype=torch.int64)
        labels.view(-1)[[1, 4]] = -100  # ignored rows: zero gradient, and not in the mean's count
        labels = labels.to(torch.int32)
        x = f64(logits).requires_grad_(True)
        loss = F.cross_entropy(x.reshape(-1, shape[-1]), labels.reshape(-1).long(), ignore_index=-100)
        (dx,) = torch.autograd.grad(loss, x)
        save("cross_entropy_grad_%d" % k, "cross_entropy_grad", [logits, labels], dx)


def composite_grads(save, gen, randn):
    # attention_grad: dq, dk, dv (which 0, 1, 2), causal and not
    for causal, shape in ((1, (2, 5, 3, 4)), (0, (1, 6, 2, 6))):
        for which in range(3):
            name = "attention_grad_%d" % (3 * (1 - causal) + which)
            g = gen("ops/" + name)
            q, k, v, dy = (randn(g, *shape) for _ in range(4))
            scale = 1.0 / math.sqrt(shape[-1])
            out = vjp(lambda a, b, c: ref.attention_core(a, b, c, scale, causal=bool(causal)), [q, k, v], which, dy)
            save(name, "attention_grad", [q, k, v, dy] + saved_stats(q, k, v, scale, causal), out,
                 {"causal": str(causal), "which": str(which), "scale": repr(scale)})

    # depth_gain_grad: the gradient of gamma (which 0) and of each of the four scalars
    for which in range(5):
        name = "depth_gain_grad_%d" % which
        g = gen("ops/" + name)
        d, layer, base = 10, 3, 100.0
        gamma = 1.0 + randn(g, d, scale=0.3)
        scalars = [torch.rand((), generator=g, dtype=torch.float32) * 1.2 - 0.6 for _ in range(4)]
        dy = randn(g, d)
        out = vjp(lambda *a: ref.depth_gain(*a, layer, base), [gamma] + scalars, which, dy)
        save(name, "depth_gain_grad", [gamma] + scalars + [dy], out,
             {"layer": str(layer), "which": str(which), "base": repr(base)})


def expert_matmul(x, w, ids, expert, nn=False):
    """x[..., S|1, K] times W (x W^T, or x W with nn) on the slots routed to expert, else 0."""
    y = x @ (w if nn else w.t())
    y = y.expand(*ids.shape, y.shape[-1])
    return y * (ids == expert).to(y.dtype).unsqueeze(-1)


def routing(save, gen, randn):
    # topk: torch.topk's ids, ties included (values from a few levels, NaN
    # first): the nth_element path with its final sort (k = 2, 3, 17) and
    # the partial_sort path (k * 64 <= n), and rows longer than the cpu kernel keeps on its stack
    for i, (rows, n, k, levels) in enumerate([(24, 8, 2, 3), (16, 9, 3, 2), (6, 20, 17, 4), (5, 130, 2, 3),
                                               (8, 60, 4, 5), (4, 8, 2, 0), (2, 5000, 3, 3)]):
        g = gen("ops/topk_%d" % i)
        if levels:
            x = torch.randint(0, levels, (rows, n), generator=g).to(torch.float32) * 0.5
        else:  # distinct values, and NaN
            x = randn(g, rows, n)
            x[0, 3] = x[1, 0] = x[1, 5] = float("nan")
        save("topk_%d" % i, "topk", [x], torch.topk(x, k, dim=-1).indices, {"k": str(k)})

    g = gen("ops/gather_0")
    x = randn(g, 2, 3, 8)
    ids = torch.randint(0, 8, (2, 3, 2), generator=g).to(torch.int32)
    save("gather_0", "gather", [x, ids], torch.gather(f64(x), -1, ids.long()))

    g = gen("ops/gather_grad_0")
    ids = torch.randint(0, 6, (3, 4, 3), generator=g).to(torch.int32)
    ids[0, 0, 1] = ids[0, 0, 0]  # a repeated id: its terms are summed
    dy = randn(g, 3, 4, 3)
    save("gather_grad_0", "gather_grad", [ids, dy],
         vjp(lambda t: torch.gather(t, -1, ids.long()), [torch.zeros(3, 4, 6)], 0, dy), {"n": "6"})

    # expert_matmul: the slot axis broadcast (1) and full (S), x W^T and x W
    for i, (xs, ws, nn) in enumerate([((2, 3, 1, 5), (4, 5), 0), ((2, 3, 2, 7), (9, 7), 0), ((3, 2, 6), (6, 5), 1)]):
        g = gen("ops/expert_matmul_%d" % i)
        x, w = randn(g, *xs), randn(g, *ws)
        ids = torch.randint(0, 3, xs[:-2] + (2,), generator=g).to(torch.int32)
        attrs = {"expert": "1", "experts": "3", "nn": str(nn)}
        save("expert_matmul_%d" % i, "expert_matmul", [x, w, ids], expert_matmul(f64(x), f64(w), ids, 1, nn), attrs)

    # expert_matmul_tn: the gradient of W, a^T b over the routed slots
    for i, (a_s, b_s) in enumerate([((2, 3, 2, 4), (2, 3, 1, 5)), ((3, 2, 7), (3, 2, 6))]):
        g = gen("ops/expert_matmul_tn_%d" % i)
        a, b = randn(g, *a_s), randn(g, *b_s)
        ids = torch.randint(0, 3, a_s[:-1], generator=g).to(torch.int32)
        out = vjp(lambda w: expert_matmul(f64(b), w, ids, 2), [torch.zeros(a_s[-1], b_s[-1])], 0, a)
        save("expert_matmul_tn_%d" % i, "expert_matmul_tn", [a, b, ids], out, {"expert": "2", "experts": "3"})


def along(save, gen, randn):
    # the ops along one axis: reductions over a first, middle and last axis
    # (counted from the back too), keepdim both ways; amax with ties (values
    # on a grid), where its gradient splits dy evenly as torch's amax does
    cases = [((3, 4, 5), 1, 0), ((2, 7), -1, 1), ((4, 3, 2), 0, 1), ((6,), 0, 0)]
    for op, fn in (("sum", torch.sum), ("mean", torch.mean), ("logsumexp", torch.logsumexp)):
        for k, (shape, axis, keep) in enumerate(cases):
            g = gen("ops/%s_%d" % (op, k))
            x = randn(g, *shape, scale=3.0)
            save("%s_%d" % (op, k), op, [x], fn(f64(x), dim=axis, keepdim=bool(keep)),
                 {"axis": str(axis), "keepdim": str(keep)})
    for k, (shape, axis, keep) in enumerate(cases):
        g = gen("ops/amax_%d" % k)
        x = torch.randint(-2, 3, shape, generator=g).to(torch.float32) * 0.5
        save("amax_%d" % k, "amax", [x], torch.amax(f64(x), dim=axis, keepdim=bool(keep)),
             {"axis": str(axis), "keepdim": str(keep)})
        g = gen("ops/amax_grad_%d" % k)
        y = torch.amax(x, dim=axis, keepdim=True)
        dy = randn(g, *y.shape)
        save("amax_grad_%d" % k, "amax_grad", [x, y, dy],
             vjp(lambda t: torch.amax(t, dim=axis, keepdim=True), [x], 0, dy), {"axis": str(axis)})
    for k, (shape, axis, rev) in enumerate([((3, 4, 5), 1, 0), ((2, 7), -1, 1), ((4, 3, 2), 0, 1)]):
        g = gen("ops/cumsum_%d" % k)
        x = randn(g, *shape)
        out = f64(x).flip(axis).cumsum(axis).flip(axis) if rev else f64(x).cumsum(axis)
        save("cumsum_%d" % k, "cumsum", [x], out, {"axis": str(axis), "reverse": str(rev)})
    # scan: h_t = a_t h_{t-1} + b_t, a python loop in f64, without and with init, both ways
    for k, (shape, axis, rev, init) in enumerate([((3, 4, 5), 1, 0, 0), ((2, 7), -1, 1, 1), ((4, 3, 2), 0, 0, 1)]):
        g = gen("ops/scan_%d" % k)
        a, b = randn(g, *shape, scale=0.5), randn(g, *shape)
        rest = [n for i, n in enumerate(shape) if i != axis % len(shape)]
        h0 = randn(g, *rest) if init else torch.zeros(rest)
        T, hs, h = shape[axis], [], f64(h0)
        for t in (reversed(range(T)) if rev else range(T)):
            h = f64(a.select(axis, t)) * h + f64(b.select(axis, t))
            hs.append(h)
        out = torch.stack(hs[::-1] if rev else hs, dim=axis)
        save("scan_%d" % k, "scan", [a, b] + ([h0] if init else []), out, {"axis": str(axis), "reverse": str(rev)})
    # concat: one, three and six inputs of different lengths along the axis
    for k, (shapes, axis) in enumerate([([(2, 3, 4)], 1), ([(2, 1, 4), (2, 3, 4), (2, 2, 4)], 1),
                                        ([(3, n) for n in (1, 2, 3, 1, 2, 5)], -1)]):
        g = gen("ops/concat_%d" % k)
        xs = [randn(g, *s) for s in shapes]
        save("concat_%d" % k, "concat", xs, torch.cat([f64(x) for x in xs], dim=axis), {"axis": str(axis)})
    # expand: new leading axes, axes of 1 repeated, -1 keeping a size
    for k, (shape, to) in enumerate([((3, 1), (2, 3, 4)), ((1, 4, 1), (5, 4, 3)), ((2,), (3, 2))]):
        g = gen("ops/expand_%d" % k)
        x = randn(g, *shape)
        spec = [-1 if i >= len(to) - len(shape) and shape[i - len(to) + len(shape)] == t else t for i, t in enumerate(to)]
        save("expand_%d" % k, "expand", [x], f64(x).expand(*to), {"shape": lst(spec)})


def products(save, gen, randn):
    """bmm: a [..., M, K] x b [..., K, N], torch.matmul in f64: equal batch axes, batch
    axes of 1 broadcast on both sides, and b of fewer axes (aligned right)."""
    for k, (sa, sb) in enumerate([((2, 3, 5, 4), (2, 3, 4, 6)), ((3, 1, 2, 7), (1, 4, 7, 5)), ((2, 3, 4, 3), (3, 5))]):
        g = gen("ops/bmm_%d" % k)
        a, b = randn(g, *sa), randn(g, *sb)
        save("bmm_%d" % k, "bmm", [a, b], torch.matmul(f64(a), f64(b)))


def integers(save, gen, randn):
    """cast between f32 and i32 (torch's .to: toward zero; on the cpu a value outside the
    i32 range, NaN too, becomes INT32_MIN), arange, and a slice of i32 ids that pads with 0.
    `to` is lrc's dtype number (ir/lrc_ir.h: f32 0, i32 3)."""
    g = gen("ops/cast_0")
    x = randn(g, 3, 7, scale=4.0)
    x.view(-1)[:8] = torch.tensor([-2.5, 2.5, -0.5, 0.0, 3e9, -3e9, float("nan"), 2147483520.0])
    save("cast_0", "cast", [x], x.to(torch.int32), {"to": "3"})
    g = gen("ops/cast_1")
    ids = torch.randint(-1000, 1000, (2, 3, 5), generator=g, dtype=torch.int64).to(torch.int32)
    ids.view(-1)[:3] = torch.tensor([16777217, -2147483648, 2147483647], dtype=torch.int32)  # rounded to the nearest float
    save("cast_1", "cast", [ids], f64(ids.to(torch.float32)), {"to": "0"})
    save("arange_0", "arange", [], torch.arange(13, dtype=torch.int32), {"n": "13"})
    g = gen("ops/slice_3")
    ids = torch.randint(0, 100, (3, 5), generator=g, dtype=torch.int64).to(torch.int32)
    save("slice_3", "slice", [ids], F.pad(ids, (1, 0))[:, :4], {"axis": "1", "start": "-1", "size": "4"})


def primitives(save, gen, randn):
    """The primitives of ir/lrc_ew.h as ops: unary ones on shapes whose last axis is no
    multiple of the cpu's vector (its scalar tail), binary and ternary ones broadcast
    on both sides (numpy rules, a lower-rank operand aligned right), comparisons with
    ties; torch's functions in f64."""
    unary = [
        ("neg", torch.neg, 1.0, 0.0), ("abs", torch.abs, 1.0, 0.0), ("sqrt", torch.sqrt, 2.0, None),
        ("rsqrt", torch.rsqrt, 2.0, None), ("log", torch.log, 2.0, None), ("log1p", torch.log1p, 2.0, -0.9),
        ("expm1", torch.expm1, 2.0, 0.0), ("sin", torch.sin, 4.0, 0.0), ("cos", torch.cos, 4.0, 0.0),
        ("erf", torch.erf, 2.0, 0.0), ("floor", torch.floor, 3.0, 0.0), ("sign", torch.sign, 1.0, 0.0),
        ("reciprocal", torch.reciprocal, 1.0, None),
    ]
    for op, fn, scale, low in unary:
        g = gen("ops/%s_0" % op)
        x = randn(g, 3, 4, 13, scale=scale)
        if low is None:  # a domain of positive values (reciprocal: away from 0 either side)
            x = x.abs() + 0.25
            if op == "reciprocal":
                x = x * torch.where(randn(g, 3, 4, 13) < 0, -1.0, 1.0)
        elif low != 0.0:
            x = x.abs() + low
        x.view(-1)[:2] = torch.tensor([1.0, 2.0])  # floor and sign: whole numbers and their edges
        if op in ("sign", "floor", "neg", "abs"):
            x.view(-1)[2:5] = torch.tensor([0.0, -0.0, -3.0])
        save("%s_0" % op, op, [x], fn(f64(x)))

    shapes = [((3, 1, 5), (4, 1)), ((2, 3, 13), (13,)), ((1,), (2, 3))]
    binary = [
        ("sub", torch.sub), ("div", torch.div), ("pow", torch.pow), ("maximum", torch.maximum),
        ("minimum", torch.minimum), ("lt", torch.lt), ("le", torch.le), ("eq", torch.eq), ("ne", torch.ne),
        ("gt", torch.gt), ("ge", torch.ge),
    ]
    for op, fn in binary:
        for k, (sa, sb) in enumerate(shapes):
            g = gen("ops/%s_%d" % (op, k))
            a, b = randn(g, *sa), randn(g, *sb)
            if op == "div":
                b = b.abs() + 0.25
            if op == "pow":
                a = a.abs() + 0.5
            if op in ("maximum", "minimum", "lt", "le", "eq", "ne", "gt", "ge"):
                a = torch.round(a * 2) / 2  # ties
                b = torch.round(b * 2) / 2
            out = fn(f64(a), f64(b))
            save("%s_%d" % (op, k), op, [a, b], out.to(torch.float64))

    for k, (sc, sa, sb) in enumerate([((3, 1, 5), (4, 1), (5,)), ((2, 3, 7), (1, 7), (2, 1, 1))]):
        g = gen("ops/where_%d" % k)
        c = (randn(g, *sc) > 0).to(torch.float32)
        a, b = randn(g, *sa), randn(g, *sb)
        save("where_%d" % k, "where", [c, a, b], torch.where(c != 0, f64(a), f64(b)))
        g = gen("ops/fma_%d" % k)
        a, b, c = randn(g, *sa), randn(g, *sc), randn(g, *sb)
        save("fma_%d" % k, "fma", [a, b, c], f64(a) * f64(b) + f64(c))

    save("full_0", "full", [], torch.full((2, 3, 5), 1.5, dtype=torch.float64), {"shape": "2,3,5", "value": "1.5"})


def make_more(save, gen, randn):
    elementwise(save, gen, randn)
    layout(save, gen, randn)
    attention(save, gen, randn)
    attention_features(save, gen, randn)
    matmul_grads(save, gen, randn)
    unary_grads(save, gen, randn)
    composite_grads(save, gen, randn)
    routing(save, gen, randn)
    along(save, gen, randn)
    products(save, gen, randn)
    integers(save, gen, randn)
    primitives(save, gen, randn)
