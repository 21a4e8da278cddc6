#!/usr/bin/python3
"""lrc's CPU GEMMs against OpenBLAS sgemm at the model's GEMM shapes, same thread count.

    /usr/bin/python3 bench/cpu_gemm.py [--threads 2] [--shapes 60m] [--batch 4] [--seq 256]
        [--repeat 10] [--rounds 3] [--lrc build/lrc] [--weights-dtype f32|bf16|q8]

C = A . W^T, A [M, K] row-major (activations), W [N, K] row-major (nn.Linear layout),
C [M, N] row-major, f32, M = batch * seq. Shapes of one forward pass of preset P:
q/k/v/o (N=d, K=d, 4L of them), gate/up (N=d_ff, K=d, 2L), down (N=d, K=d_ff, L),
lm_head (N=vocab, K=d, 1).

Both sides run in this one invocation, interleaved per shape and round:
  * OpenBLAS: cblas_sgemm(RowMajor, NoTrans, Trans, ...) called directly through ctypes on
    Debian's pthreads OpenBLAS (libopenblas0-pthread), openblas_set_num_threads(threads),
    numpy buffers; --repeat timed calls per round after --warmup calls;
  * lrc: `lrc gemm-bench --m M --n N --k K --threads T --repeat R [--weights-dtype D]`, which
    must print `gemm M N K: median X ms, Y GFLOP/s`. With --weights-dtype bf16 or q8 lrc packs W
    as `lrc compile --weights-dtype` does; OpenBLAS stays f32 sgemm, the
    reference a user of f32 weights would call.
Each side's figure per shape is the median of its per-round medians. The total is
FLOP-weighted over one forward pass: sum(count * flops) / sum(count * median time).

Exit status: 0 measured (the 80% target is reported, not enforced, unless --strict),
1 lrc gemm-bench failed or is not available (the OpenBLAS column is still printed).
"""

import argparse
import ctypes
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

GEMM_TARGET = 0.80  # lrc >= 80% of OpenBLAS at each shape and in total

RE_GEMM = re.compile(r"gemm\s+(\d+)\s+(\d+)\s+(\d+):\s*median\s+([0-9.eE+-]+)\s*ms,\s*([0-9.eE+-]+)\s*GFLOP/s")

CblasRowMajor, CblasNoTrans, CblasTrans = 101, 111, 112


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shapes", default="60m", help="model preset whose GEMM shapes to time (default 60m)")
    ap.add_argument("--norm", default="pre", help="placement (does not change the GEMM shapes)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=10, help="timed calls per side per shape per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lrc", default="build/lrc", help="lrc binary (relative to the repository root)")
    ap.add_argument("--strict", action="store_true", help="exit 4 when the 80%% target is missed")
    ap.add_argument("--weights-dtype", default="f32", choices=("f32", "bf16", "q8"), help="lrc's packed W (default f32)")
    a = ap.parse_args()
    if min(a.threads, a.batch, a.seq, a.repeat, a.rounds) < 1:
        ap.error("--threads, --batch, --seq, --repeat and --rounds must be positive")
    return a


def gemm_shapes(cfg, M):
    """(name, M, N, K, count per forward) of every GEMM of the linear layers."""
    d, ff, L, V = cfg.d_model, cfg.d_ff, cfg.n_layers, cfg.vocab
    return [
        ("q/k/v/o", M, d, d, 4 * L),
        ("gate/up", M, ff, d, 2 * L),
        ("down", M, d, ff, L),
        ("lm_head", M, V, d, 1),
    ]


class OpenBLAS:
    def __init__(self, threads):
        self.lib, self.info = common.load_openblas_pthread()
        self.lib.openblas_set_num_threads(ctypes.c_int(threads))
        self.info.update(common.openblas_info(self.lib))
        f = self.lib.cblas_sgemm
        f.restype = None
        fp = ctypes.POINTER(ctypes.c_float)
        f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_float, fp, ctypes.c_int, fp, ctypes.c_int, ctypes.c_float, fp, ctypes.c_int]
        self.sgemm = f

    def bind(self, A, W, C):
        """A no-argument callable computing C = A . W^T (all row-major f32)."""
        M, K = A.shape
        N = W.shape[0]
        assert W.shape == (N, K) and C.shape == (M, N)
        for x in (A, W, C):
            assert x.dtype == np.float32 and x.flags["C_CONTIGUOUS"]
        fp = ctypes.POINTER(ctypes.c_float)
        pa, pw, pc = (x.ctypes.data_as(fp) for x in (A, W, C))
        f = self.sgemm

        def call():
            f(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0, pa, K, pw, K, 0.0, pc, N)
        return call


def main():
    a = parse_args()
    cfg = common.model_config(a.shapes, a.norm)
    M = a.batch * a.seq
    shapes = gemm_shapes(cfg, M)
    ob = OpenBLAS(a.threads)
    try:
        tb = common.torch_blas()
        if not tb.get("is_openblas"):
            print("WARNING: torch is NOT on OpenBLAS (%s); this script does not use torch" % tb.get("libs"))
    except SystemExit:
        tb = None
    # torch_blas() loaded the same OpenBLAS instance in this process: set its threads again
    ob.lib.openblas_set_num_threads(ctypes.c_int(a.threads))
    ob.info.update(common.openblas_info(ob.lib))
    lrc = a.lrc if os.path.isabs(a.lrc) else os.path.join(common.REPO, a.lrc)
    total_flops = sum(2.0 * m * n * k * c for _, m, n, k, c in shapes)
    common.print_header("lrc GEMM vs OpenBLAS sgemm (f32, C = A . W^T)", a.threads, blas=ob.info,
                        torch_blas_info=tb, torch_note="%s (not timed here; BLAS shown for reference)" % (
                            sys.modules["torch"].__version__ if "torch" in sys.modules else "?"), extra=[
        ("shapes", "preset %s (d=%d L=%d d_ff=%d vocab=%d), M = batch %d x seq %d = %d" % (
            a.shapes, cfg.d_model, cfg.n_layers, cfg.d_ff, cfg.vocab, a.batch, a.seq, M)),
        ("GEMM work", "%.1f GFLOP per forward pass (linear layers)" % (total_flops / 1e9)),
        ("schedule", "%d rounds x %d timed calls per side per shape, warm-up %d" % (a.rounds, a.repeat, a.warmup)),
        ("lrc", "%s (W stored %s)" % (lrc, a.weights_dtype)),
        ("load avg", common.loadavg() + " (start)"),
    ])

    rng = np.random.default_rng(0)
    bufs, calls = {}, {}
    for name, m, n, k, _ in shapes:
        A = rng.standard_normal((m, k), dtype=np.float32)
        W = (rng.standard_normal((n, k), dtype=np.float32) * 0.02).astype(np.float32)
        C = np.zeros((m, n), dtype=np.float32)
        bufs[name] = (A, W, C)
        calls[name] = ob.bind(A, W, C)
        calls[name]()
        ref = A[:64].astype(np.float64) @ W.astype(np.float64).T
        err = np.abs(C[:64] - ref).max() / np.abs(ref).max()
        if not err < 1e-5:
            sys.exit("error: cblas_sgemm result wrong at %s (rel err %.2e)" % (name, err))
        for _ in range(a.warmup):
            calls[name]()

    lrc_error = None
    if not (os.path.isfile(lrc) and os.access(lrc, os.X_OK)):
        lrc_error = "no lrc binary at %s" % lrc
        print("lrc gemm-bench not available: %s" % lrc_error)

    ob_med = {s[0]: [] for s in shapes}
    lrc_med = {s[0]: [] for s in shapes}
    for r in range(a.rounds):
        parts = []
        for name, m, n, k, _ in shapes:
            t = common.time_call(calls[name], a.repeat)
            ob_med[name].append(common.median(t))
            part = "%s ob %.2f ms" % (name, common.median(t) * 1e3)
            if lrc_error is None:
                cmd = [lrc, "gemm-bench", "--m", str(m), "--n", str(n), "--k", str(k),
                       "--threads", str(a.threads), "--repeat", str(a.repeat), "--weights-dtype", a.weights_dtype]
                _, proc = common.time_command(cmd, 1)
                hits = [h for h in RE_GEMM.findall((proc.stdout or "") + "\n" + (proc.stderr or ""))
                        if (int(h[0]), int(h[1]), int(h[2])) == (m, n, k)]
                if proc.returncode != 0 or not hits:
                    lrc_error = ("exit %d" % proc.returncode) if proc.returncode != 0 else \
                        "no 'gemm %d %d %d: median X ms, Y GFLOP/s' line" % (m, n, k)
                    print("lrc gemm-bench not available (%s)" % lrc_error)
                    print("  command: %s" % " ".join(cmd))
                    for label, text in (("stderr", proc.stderr), ("stdout", proc.stdout)):
                        text = (text or "").strip()
                        if text:
                            print("  --- lrc %s ---" % label)
                            print("\n".join("  " + l for l in text.splitlines()[-20:]))
                else:
                    ms, gf = float(hits[-1][3]), float(hits[-1][4])
                    lrc_med[name].append(ms / 1e3)
                    mine = 2.0 * m * n * k / (ms / 1e3) / 1e9
                    if abs(mine - gf) > 0.05 * mine:
                        print("note: lrc says %.1f GFLOP/s for %s, its own %.3f ms give %.1f" % (gf, name, ms, mine))
                    part += ", lrc %.2f ms" % ms
            parts.append(part)
        print("round %d/%d: %s" % (r + 1, a.rounds, "; ".join(parts)))
        sys.stdout.flush()

    print("-" * 78)
    print("%-8s %5s %5s %5s %5s %10s %10s %10s %10s %8s  %s" % (
        "gemm", "M", "N", "K", "count", "OB ms", "OB GF/s", "lrc ms", "lrc GF/s", "lrc/OB", "target 80%"))
    t_ob = t_lrc = 0.0
    lrc_all = True
    missed = []
    for name, m, n, k, c in shapes:
        fl = 2.0 * m * n * k
        to = common.median(ob_med[name])
        t_ob += c * to
        row = "%-8s %5d %5d %5d %5d %10.2f %10.1f" % (name, m, n, k, c, to * 1e3, fl / to / 1e9)
        if lrc_med[name]:
            tl = common.median(lrc_med[name])
            t_lrc += c * tl
            frac = to / tl
            row += " %10.2f %10.1f %7.0f%%  %s" % (tl * 1e3, fl / tl / 1e9, 100 * frac,
                                                   "PASS" if frac >= GEMM_TARGET else "MISS")
            if frac < GEMM_TARGET:
                missed.append(name)
        else:
            lrc_all = False
            row += " %10s %10s %8s  %s" % ("-", "n/a", "-", "-")
        print(row)
    print("-" * 78)
    line = "FLOP-weighted, one forward (%.1f GFLOP): OpenBLAS %.1f ms = %.1f GFLOP/s" % (
        total_flops / 1e9, t_ob * 1e3, total_flops / t_ob / 1e9)
    if lrc_all:
        frac = t_ob / t_lrc
        line += "; lrc %.1f ms = %.1f GFLOP/s; lrc/OpenBLAS %.0f%%  %s" % (
            t_lrc * 1e3, total_flops / t_lrc / 1e9, 100 * frac, "PASS" if frac >= GEMM_TARGET else "MISS")
        if frac < GEMM_TARGET:
            missed.append("total")
    else:
        line += "; lrc n/a"
    print(line)
    return common.finish(lrc_error, ("lrc gemm-bench not available", "OpenBLAS figures above are still valid"),
                         a.strict, missed, "80% target missed at")


if __name__ == "__main__":
    common.run_timed_main(main)
