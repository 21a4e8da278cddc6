#!/usr/bin/env python3
# train_check.py — what train.sh and train_opts.sh compute independently of
# lrc (standard library only): the closed forms of AdamW's first step and of
# the learning-rate schedule, the init rules of docs/models.md, and
# Fashion-MNIST's test images and an accuracy counted from logits.
# Each command prints what it measured and exits 1 when a check fails.
import array, gzip, json, math, struct, sys

def tensors(path):  # name -> (shape, array of float) for F32 tensors
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    out = {}
    for k, v in h.items():
        if v["dtype"] not in ("F32", "I32"):
            continue
        a = array.array("f" if v["dtype"] == "F32" else "i")
        lo, hi = v["data_offsets"]
        a.frombytes(b[8 + n + lo:8 + n + hi])
        out[k] = (v["shape"], a)
    return out

def write_st(path, ts):  # name -> (dtype, shape, array)
    h, data, off = {}, b"", 0
    for k, (dt, shape, a) in ts.items():
        raw = a.tobytes()
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    s = json.dumps(h, separators=(",", ":")).encode()
    s += b" " * (-len(s) % 8)
    open(path, "wb").write(struct.pack("<Q", len(s)) + s + data)

failed = 0
def check(ok, what):
    global failed
    if not ok:
        failed += 1
        print("FAIL " + what)

def model_tensors(path):  # the parameters only, not the optimizer state or train.*
    return {k: v for k, v in tensors(path).items() if not k.startswith(("adam.", "train."))}

def decay(init, base, decayed, lr, wd, mode):
    """Step 1 of AdamW from the same initial weights and gradients: p1 =
    p0 (1 - lr wd) - lr u, so decayed - base = -lr wd p0 on the decayed
    tensors (matrices, or every tensor with `all`), exactly 0 elsewhere."""
    p0, pb, pd = model_tensors(init), model_tensors(base), model_tensors(decayed)
    check(set(p0) == set(pb) == set(pd), "the three files hold different tensors")
    worst, moved = 0.0, 0
    for k in sorted(p0):
        shape, a0 = p0[k]
        b, d = pb[k][1], pd[k][1]
        if len(shape) >= 2 or mode == "all":
            want = [-lr * wd * x for x in a0]
            err = sum(abs((y - x) - w) for x, y, w in zip(b, d, want))
            size = sum(abs(w) for w in want)
            check(size > 0, k + ": the predicted decay is zero (initial weights all 0?)")
            rel = err / size if size else 1
            worst = max(worst, rel)
            moved += 1
            check(rel < 1e-2, "%s: moved %.3g off lr*wd*w (relative)" % (k, rel))
        else:
            same = sum(x != y for x, y in zip(b, d))
            check(same == 0, "%s: %d values decayed, expected none (%s)" % (k, same, mode))
    print("decay %s: %d tensors moved by -lr*wd*w within %.2e (relative), the rest unchanged" % (mode, moved, worst))

def moments(ckpt, gn, clip):
    """After step 1, m = (1 - b1) s g and v = (1 - b2) (s g)^2 with s =
    min(1, clip / |g|): |m| = 0.1 min(|g|, clip), sum v = 0.001 min(|g|, clip)^2."""
    ts = tensors(ckpt)
    m2 = sum(x * x for k, (s, a) in ts.items() if k.startswith("adam.m/") for x in a)
    vs = sum(x for k, (s, a) in ts.items() if k.startswith("adam.v/") for x in a)
    n = min(gn, clip) if clip > 0 else gn
    m, v = 0.1 * n, 1e-3 * n * n
    print("moments: |m| %.9g (expected %.9g), sum v %.9g (expected %.9g)" % (math.sqrt(m2), m, vs, v))
    # 5e-5: 1 - beta2 in f32 is 0.0010000000475 (rounded from double, as
    # PyTorch) or 0.00099998713 (1.f - 0.999f), 1.3e-5 apart; a clip that
    # is ignored or wrong is off by far more (here a factor 2 in |m|)
    check(abs(math.sqrt(m2) - m) <= 5e-5 * m, "|m| is not (1 - beta1) times the clipped gradient norm")
    check(abs(vs - v) <= 5e-5 * v, "sum v is not (1 - beta2) times the clipped norm squared")

def schedule(metrics, peak, warmup, steps):
    """lrc's schedule (docs/cli.md): a linear warm-up over floor(F N) steps
    (step s gets peak (s + 1) / W), then cosine from peak down to 0.1 peak."""
    lines = [json.loads(l) for l in open(metrics)]
    W = math.floor(warmup * steps)
    check([l["step"] for l in lines] == list(range(1, steps + 1)), "metrics do not hold steps 1..%d" % steps)
    worst = 0.0
    for l in lines:
        s = l["step"] - 1
        if s < W:
            want = peak * (s + 1) / W
        else:
            p = (s - W) / (steps - W)
            want = peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))
        rel = abs(l["lr"] - want) / want
        worst = max(worst, rel)
        check(rel <= 1e-9, "step %d: lr %.17g, expected %.17g" % (s + 1, l["lr"], want))
    print("schedule: %d steps, warm-up %d, largest relative difference %.2e" % (len(lines), W, worst))

def init_rules(path, norm, L, layerrope_beta):
    """docs/models.md: linear weights N(0, 0.02), the embedding N(0, sqrt(2/5)),
    norm weights 1; deepnet: v, o, gate, up, down xavier-normal with gain
    (8L)^(-1/4), q and k with gain 1; LayerRoPE gamma 1, alpha = alpha_rot
    = 0, beta as configured, beta_rot = -0.5."""
    ts = tensors(path)
    counted = {}
    for k in sorted(ts):
        shape, a = ts[k]
        n = len(a)
        if k.startswith("model.layerrope."):
            ends = [("_alpha_rot", 0.0), ("_beta_rot", -0.5), ("_gamma", 1.0), ("_alpha", 0.0), ("_beta", layerrope_beta)]
            want = next((v for e, v in ends if k.endswith(e)), None)
            check(want is not None and all(x == want for x in a), "%s: %s, expected all %s" % (k, list(a[:4]), want))
            counted["layerrope"] = counted.get("layerrope", 0) + 1
            continue
        if len(shape) == 1:  # a norm's gain
            check(all(x == 1.0 for x in a), "%s: not all ones" % k)
            counted["gains"] = counted.get("gains", 0) + 1
            continue
        if k == "model.embed_tokens.weight":
            std = math.sqrt(2 / 5)
        elif norm == "deepnet" and k.split(".")[-2] in ("v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
            std = (8 * L) ** -0.25 * math.sqrt(2 / (shape[0] + shape[1]))
        elif norm == "deepnet" and k.split(".")[-2] in ("q_proj", "k_proj"):
            std = math.sqrt(2 / (shape[0] + shape[1]))
        else:
            std = 0.02
        mean = sum(a) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in a) / n)
        within = sum(abs(x) < std for x in a) / n  # 0.6827 for a normal law
        # 4 standard errors of the sample mean, std and one-sigma fraction
        check(abs(sd / std - 1) < 0.05, "%s: std %.5g, the rule says %.5g" % (k, sd, std))
        check(abs(mean) < 4 * std / math.sqrt(n), "%s: mean %.3g, expected 0 (std %.3g, %d values)" % (k, mean, std, n))
        check(abs(within - 0.6827) < 4 * 0.4654 / math.sqrt(n), "%s: %.4f within one std, not normal" % (k, within))
        counted["random"] = counted.get("random", 0) + 1
    print("init %s: %s" % (norm, ", ".join("%d %s" % (v, k) for k, v in sorted(counted.items()))))

def idx(path):
    b = gzip.open(path).read()
    rank = b[3]
    dims = struct.unpack(">%dI" % rank, b[4:4 + 4 * rank])
    return dims, b[4 + 4 * rank:]

def testset(data_dir, out, labels_out):
    """The test images normalized as runtime/images.c documents: x / 255, less
    the training split's mean, over its std (the first 55,000 images)."""
    (n, h, w), tr = idx(data_dir + "/train-images-idx3-ubyte.gz")
    count = (n - 5000) * h * w
    hist = [0] * 256
    for v in tr[:count]:
        hist[v] += 1
    s = sum(v * c for v, c in enumerate(hist))
    sq = sum(v * v * c for v, c in enumerate(hist))
    mean = s / count / 255.0
    std = math.sqrt(sq / count / (255.0 * 255.0) - mean * mean)
    table = [(v / 255.0 - mean) / std for v in range(256)]
    (nt, _, _), te = idx(data_dir + "/t10k-images-idx3-ubyte.gz")
    _, lab = idx(data_dir + "/t10k-labels-idx1-ubyte.gz")
    write_st(out, {"images": ("F32", [nt, 1, h, w], array.array("f", (table[v] for v in te)))})
    open(labels_out, "w").write(" ".join(str(x) for x in lab))

def accuracy(logits, labels):
    shape, a = tensors(logits)["logits"]
    lab = [int(x) for x in open(labels).read().split()]
    K = shape[-1]
    right = sum(max(range(K), key=lambda j: a[i * K + j]) == lab[i] for i in range(len(lab)))
    print("%.4f %d" % (right / len(lab), len(lab)))

cmd, a = sys.argv[1], sys.argv[2:]
if cmd == "decay":  # INIT BASE DECAYED LR WD matrices|all
    decay(a[0], a[1], a[2], float(a[3]), float(a[4]), a[5])
elif cmd == "moments":  # CHECKPOINT GRAD_NORM CLIP (0: off)
    moments(a[0], float(a[1]), float(a[2]))
elif cmd == "schedule":  # METRICS PEAK WARMUP STEPS
    schedule(a[0], float(a[1]), float(a[2]), int(a[3]))
elif cmd == "init":  # WEIGHTS NORM N_LAYERS LAYERROPE_BETA
    init_rules(a[0], a[1], int(a[2]), float(a[3]))
elif cmd == "testset":  # DATA_DIR OUT.safetensors LABELS.txt
    testset(a[0], a[1], a[2])
elif cmd == "accuracy":  # LOGITS.safetensors LABELS.txt: prints "ACC N"
    accuracy(a[0], a[1])
else:
    sys.exit("train_check.py: unknown command " + cmd)
sys.exit(1 if failed else 0)
