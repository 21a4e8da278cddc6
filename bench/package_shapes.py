#!/usr/bin/python3
"""A package's cost at shorter shapes than compiled (issue 17, point 7).

    /usr/bin/python3 bench/package_shapes.py [--preset 60m] [--batch 4] [--seq 256]
        [--threads 2] [--repeat 10] [--rounds 3] [--lrc build/lrc]

One package is compiled with `lrc compile --batch B --seq T` (random weights from
`lrc init`), and a second one for exactly [B, T/4]. In rounds, interleaved, each runs
    lrc forward PKG --input IN -o OUT --repeat R
which prints `forward: median X ms over R runs` (the whole lrc_session_run: padding,
the forward, cutting the outputs):
  * big@T:    the [B, T] package on [B, T] tokens;
  * big@T/4:  the [B, T] package on the first T/4 positions of the same tokens;
  * exact@T/4: the [B, T/4] package on those;
  * big@B/2:  the [B, T] package on the first B/2 rows (when B > 1).
Each figure is the median of the per-round medians. It prints the ratios big@T/4 / big@T
(target <= 0.4) and big@T/4 / exact@T/4, and the largest difference between the logits of
big@T/4 and exact@T/4 (target <= 1e-6; the padding is never read). Exit status: 0
measured, 1 lrc failed or the logits differ, 4 with --strict when the ratio is missed.
"""

import argparse
import os
import random
import re
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

sys.path.insert(0, os.path.join(common.REPO, "tests", "tools"))
import st  # noqa: E402

RATIO_TARGET = 0.4


def write_tokens(path, rows):
    B, T = len(rows), len(rows[0])
    flat = [v for r in rows for v in r]
    st.write(path, {"tokens": {"dtype": "I32", "shape": [B, T], "data_offsets": [0, 4 * B * T]}},
             struct.pack("<%di" % len(flat), *flat))


def forward_ms(lrc, pkg, inp, out, threads, repeat):
    times, proc = common.time_command([lrc, "forward", pkg, "--input", inp, "-o", out, "--threads", str(threads),
                                       "--repeat", str(repeat)], 1)
    if proc.returncode != 0:
        raise RuntimeError("lrc forward %s failed: %s" % (pkg, proc.stderr.strip()))
    m = re.search(r"forward:\s*median\s+([0-9.eE+-]+)\s*ms", proc.stdout)
    if not m:
        raise RuntimeError("lrc forward printed no median: %s" % proc.stdout)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="60m")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lrc", default=os.path.join(common.REPO, "build", "lrc"))
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args()
    B, T, T4 = a.batch, a.seq, max(1, a.seq // 4)
    common.print_header("package shapes: a [B, T] package run shorter", a.threads,
                        extra=[("model", "llama preset %s" % a.preset), ("compiled", "[%d, %d]" % (B, T)),
                               ("shorter", "[%d, %d] and [%d, %d]" % (B, T4, max(1, B // 2), T))])
    tmp = tempfile.mkdtemp(prefix="lrc-shapes-")
    lrc = a.lrc
    w = os.path.join(tmp, "w.safetensors")
    cfg = common.model_config(a.preset)
    V = cfg.vocab
    rng = random.Random(0)
    rows = [[rng.randrange(V) for _ in range(T)] for _ in range(B)]
    inputs = {"T": rows, "T/4": [r[:T4] for r in rows], "B/2": rows[:max(1, B // 2)]}
    for k, v in inputs.items():
        write_tokens(os.path.join(tmp, "in_%s.st" % k.replace("/", "_")), v)
    common.time_command([lrc, "init", "models/llama.lua", "--preset", a.preset, "-o", w], 1)
    big, exact = os.path.join(tmp, "big"), os.path.join(tmp, "exact")
    for pkg, b, t in ((big, B, T), (exact, B, T4)):
        _, proc = common.time_command([lrc, "compile", "models/llama.lua", "--preset", a.preset, "--weights", w,
                                       "--target", "cpu", "--batch", str(b), "--seq", str(t), "-o", pkg], 1)
        if proc.returncode != 0:
            print("RESULT: lrc compile failed: %s" % proc.stderr.strip())
            return 1
        print("compile [%d, %d]: %s" % (b, t, proc.stdout.splitlines()[1] if len(proc.stdout.splitlines()) > 1 else ""))
    cases = [("big@T", big, "T"), ("big@T/4", big, "T/4"), ("exact@T/4", exact, "T/4")]
    if B > 1:
        cases.append(("big@B/2", big, "B/2"))
    got = {c[0]: [] for c in cases}
    try:
        for r in range(a.rounds):
            for name, pkg, k in cases:
                inp = os.path.join(tmp, "in_%s.st" % k.replace("/", "_"))
                out = os.path.join(tmp, "out_%s.st" % name.replace("/", "_").replace("@", "_"))
                got[name].append(forward_ms(lrc, pkg, inp, out, a.threads, a.repeat))
    except RuntimeError as e:
        print("RESULT: %s" % e)
        return 1
    med = {k: common.median(v) for k, v in got.items()}
    for name, _, _ in cases:
        print("%-10s median %8.2f ms  (rounds: %s)" % (name, med[name], ", ".join("%.2f" % x for x in got[name])))
    la = st.arrays(os.path.join(tmp, "out_big_T_4.st"))["logits"][2]
    lb = st.arrays(os.path.join(tmp, "out_exact_T_4.st"))["logits"][2]
    diff = max(abs(x - y) for x, y in zip(la, lb)) if len(la) == len(lb) else float("inf")
    ratio = med["big@T/4"] / med["big@T"]
    print("ratio big@T/4 / big@T = %.3f (target <= %.1f)" % (ratio, RATIO_TARGET))
    print("ratio big@T/4 / exact@T/4 = %.3f" % (med["big@T/4"] / med["exact@T/4"]))
    if B > 1:
        print("ratio big@B/2 / big@T = %.3f" % (med["big@B/2"] / med["big@T"]))
    print("logits big@T/4 vs exact@T/4: max |diff| = %.3g (%d values)" % (diff, len(la)))
    if diff > 1e-6:
        print("RESULT: the logits differ")
        return 1
    return common.finish(None, None, a.strict, ["ratio %.3f" % ratio] if ratio > RATIO_TARGET else [], "missed")


if __name__ == "__main__":
    common.run_timed_main(main)
