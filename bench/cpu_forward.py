#!/usr/bin/python3
"""lrc's CPU forward pass against PyTorch eager (f32), same model, shapes and thread count.

    /usr/bin/python3 bench/cpu_forward.py [--preset 60m] [--norm pre] [--batch 4] [--seq 256]
        [--threads 2] [--repeat 10] [--rounds 3] [--lrc build/lrc] [--torch-impl both|ref|nn]

Both sides run in this one invocation, interleaved in rounds (torch, lrc, torch, lrc, ...)
so that machine noise hits both:
  * torch: f32 eager forward under torch.no_grad() with torch.set_num_threads(threads) (and
    the same count for the OpenBLAS that torch calls); `ref` is llama_ref's functional
    pieces run in f32, `nn` the idiomatic eager version (F.linear, torch.softmax, F.silu,
    cached RoPE tables); --repeat timed calls per round after --warmup calls; torch's
    OpenMP pool runs with OMP_WAIT_POLICY=PASSIVE (--omp-wait-policy; spinning OpenMP
    workers fight OpenBLAS's own pool for the cores and make torch 2-4x slower here);
  * lrc: `lrc init ... -o W` once (its weights are also loaded into the torch side, so both
    compute the same function and the logits are compared), then per round one
        lrc forward MODEL --preset P --set norm=N --weights W --input IN -o OUT
            --target cpu --threads T --repeat R
    which must print `forward: median X ms over N runs` and `compile: X ms`.

Each side's figure is the median of its per-round medians. The headline ratio is against
the faster torch variant. Exit status: 0 measured (targets are reported, not enforced,
unless --strict), 1 lrc failed or is wrong, 3 torch is not on OpenBLAS.
"""

import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

FORWARD_TARGET = 1.5     # lrc forward >= 1.5x PyTorch eager
COMPILE_TARGET_MS = 2000  # Lua -> runnable code < 2 s

RE_FORWARD = re.compile(r"forward:\s*median\s+([0-9.eE+-]+)\s*ms\s+over\s+(\d+)\s+runs")
RE_COMPILE = re.compile(r"compile:\s*([0-9.eE+-]+)\s*ms")


def parse_args():
    ap = common.model_run_parser(__doc__)
    ap.add_argument("--norm", default="pre")
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per side per round (lrc --repeat)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed torch calls before the first round")
    ap.add_argument("--torch-impl", default="both", choices=("both",) + common.TORCH_IMPLS,
                    help="torch baseline(s): ref = llama_ref pieces in f32, nn = idiomatic eager")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-3,
                    help="max |lrc - torch| / max |torch| allowed on the logits (default 1e-3)")
    ap.add_argument("--no-check", action="store_true", help="skip comparing lrc's logits with torch's")
    ap.add_argument("--keep", metavar="DIR", help="keep the weights/input/output files in DIR")
    a = ap.parse_args()
    if a.repeat < 1 or a.rounds < 1 or a.threads < 1 or a.batch < 1 or a.seq < 1:
        ap.error("--repeat, --rounds, --threads, --batch and --seq must be positive")
    return a


def fmt_ms(s):
    return "%.1f" % (s * 1e3)


def main():
    a = parse_args()
    chosen = common.choose_blas_core(a.blas_core)  # before torch is imported; may run this script again
    common.set_omp_wait_policy(a.omp_wait_policy)  # before torch is imported
    common.import_torch()
    import safetensors_io

    blas = common.torch_blas()
    common.require_openblas(blas)
    ob_threads = common.set_torch_threads(a.threads, blas)
    blas["num_threads"] = ob_threads
    cfg = common.model_config(a.preset, a.norm)
    impls = list(common.TORCH_IMPLS) if a.torch_impl == "both" else [a.torch_impl]
    lin, att = common.forward_flops(cfg, a.batch, a.seq)
    ntok = a.batch * a.seq
    lrc = a.lrc if os.path.isabs(a.lrc) else os.path.join(common.REPO, a.lrc)

    common.print_header("lrc CPU forward vs PyTorch eager (f32)", a.threads, torch_blas_info=blas, extra=[
        ("model", "%s preset %s, norm=%s (d=%d L=%d heads=%d d_ff=%d vocab=%d)" % (
            a.model, a.preset, a.norm, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, cfg.vocab)),
        ("shape", "batch %d x seq %d = %d tokens; %.1f GFLOP (linear %.1f + attention %.1f)" % (
            a.batch, a.seq, ntok, (lin + att) / 1e9, lin / 1e9, att / 1e9)),
        ("schedule", "%d rounds x %d timed runs per side, torch warm-up %d; torch impl: %s" % (
            a.rounds, a.repeat, a.warmup, ", ".join(impls))),
        ("lrc", lrc),
        ("BLAS core", chosen or "as the environment has it (--blas-core %s)" % a.blas_core),
        ("load avg", common.loadavg() + " (start)"),
    ])

    work = a.keep or tempfile.mkdtemp(prefix="lrc-bench-")
    os.makedirs(work, exist_ok=True)
    W = os.path.join(work, "weights-%s-%s.safetensors" % (a.preset, a.norm))
    IN = os.path.join(work, "input-%dx%d.safetensors" % (a.batch, a.seq))
    OUT = os.path.join(work, "logits.safetensors")
    lrc_error = None  # first failure of the lrc side, a message

    def lrc_failed(what, proc=None):
        nonlocal lrc_error
        msg = what
        if proc is not None:
            msg += " (exit %d)" % proc.returncode
        print("lrc FAILED: %s" % msg)
        if proc is not None:
            print("  command: %s" % " ".join(proc.args))
            for name, text in (("stderr", proc.stderr), ("stdout", proc.stdout)):
                text = (text or "").strip()
                if text:
                    print("  --- lrc %s ---" % name)
                    print("\n".join("  " + l for l in text.splitlines()[-40:]))
        sys.stdout.flush()
        if lrc_error is None:
            lrc_error = msg

    try:
        # ---- inputs: lrc's weights (also used by torch) and the tokens ------------------
        tokens = common.random_tokens(cfg, a.batch, a.seq, seed=a.seed)
        safetensors_io.save(IN, {"tokens": tokens})
        params = None
        if not (os.path.isfile(lrc) and os.access(lrc, os.X_OK)):
            lrc_failed("no lrc binary at %s (build it first)" % lrc)
        else:
            cmd = [lrc, "init", a.model, "--preset", a.preset, "--set", "norm=" + a.norm,
                   "--seed", str(a.seed), "-o", W]
            times, proc = common.time_command(cmd, 1)
            if proc.returncode != 0:
                lrc_failed("lrc init", proc)
            else:
                print("lrc init: %.2f s -> %s" % (times[0], W))
                loaded, _ = safetensors_io.load(W)
                params = common.check_params_f32(loaded, cfg)
                del loaded
        if params is None:
            print("torch weights: random N(0, 0.02), norm gains 1 (lrc init unavailable)")
            params = common.random_params_f32(cfg, seed=a.seed)
        else:
            print("torch weights: lrc init's file (both sides compute the same function)")

        # ---- torch warm-up and cross-check of the variants -----------------------------
        runs = {impl: common.make_torch_forward(cfg, params, tokens, impl) for impl in impls}
        torch_logits = None
        for impl in impls:
            for i in range(max(1, a.warmup)):
                out = runs[impl]()
            if torch_logits is None:
                torch_logits = out
            else:
                err = common.rel_err(out, torch_logits)
                print("torch %s vs %s logits: max|diff|/max|ref| = %.2e" % (impl, impls[0], err))
                if err > 1e-4:
                    sys.exit("error: the torch variants disagree (%.2e); fix bench/common.py" % err)
            del out
        sys.stdout.flush()

        # ---- interleaved rounds ----------------------------------------------------------
        sides = ["torch-" + i for i in impls] + ["lrc"]
        round_med = {s: [] for s in sides}   # per-round medians, seconds
        samples = {s: [] for s in sides}     # torch: every timed call
        compile_ms, lrc_wall = [], []
        fwd_cmd = [lrc, "forward", a.model, "--preset", a.preset, "--set", "norm=" + a.norm,
                   "--weights", W, "--input", IN, "-o", OUT, "--target", "cpu",
                   "--threads", str(a.threads), "--repeat", str(a.repeat)]
        for r in range(a.rounds):
            parts = []
            for impl in impls:
                t = common.time_call(runs[impl], a.repeat)
                samples["torch-" + impl] += t
                round_med["torch-" + impl].append(common.median(t))
                parts.append("torch-%s %s ms" % (impl, fmt_ms(common.median(t))))
            if lrc_error is None:
                times, proc = common.time_command(fwd_cmd, 1)
                text = (proc.stdout or "") + "\n" + (proc.stderr or "")
                mf = RE_FORWARD.findall(text)
                mc = RE_COMPILE.findall(text)
                if proc.returncode != 0:
                    lrc_failed("lrc forward", proc)
                elif not mf:
                    lrc_failed("lrc forward printed no 'forward: median X ms over N runs' line", proc)
                else:
                    ms, n = float(mf[-1][0]), int(mf[-1][1])
                    round_med["lrc"].append(ms / 1e3)
                    lrc_wall.append(times[0])
                    if n != a.repeat:
                        print("note: lrc reports %d runs, asked for %d" % (n, a.repeat))
                    if mc:
                        compile_ms.append(float(mc[-1]))
                    parts.append("lrc %.1f ms (compile %s ms, process %.2f s)" % (
                        ms, mc[-1] if mc else "?", times[0]))
            print("round %d/%d: %s" % (r + 1, a.rounds, "; ".join(parts)))
            sys.stdout.flush()

        # ---- lrc's logits against torch's ----------------------------------------------
        check = "not run"
        if lrc_error is None and not a.no_check:
            got, _ = safetensors_io.load(OUT)
            if "logits" not in got:
                lrc_failed("lrc forward wrote no 'logits' tensor to %s" % OUT)
            elif tuple(got["logits"].shape) != tuple(torch_logits.shape):
                lrc_failed("lrc logits have shape %s, expected %s" % (
                    tuple(got["logits"].shape), tuple(torch_logits.shape)))
            else:
                err = common.rel_err(got["logits"], torch_logits)
                check = "max|lrc - torch|/max|torch| = %.2e (tol %.0e)" % (err, a.tol)
                if not err <= a.tol:
                    lrc_failed("lrc logits differ from torch's: " + check)
            del got

        # ---- report ---------------------------------------------------------------------
        print("-" * 78)
        print("%-10s %12s %12s %10s  %s" % ("side", "median ms", "tokens/s", "GFLOP/s", "per-round medians (ms)"))
        med = {}
        for s in sides:
            if not round_med[s]:
                print("%-10s %12s" % (s, "FAILED" if s == "lrc" else "-"))
                continue
            med[s] = common.median(round_med[s])
            print("%-10s %12.1f %12.0f %10.1f  %s" % (
                s, med[s] * 1e3, ntok / med[s], (lin + att) / med[s] / 1e9,
                " ".join(fmt_ms(x) for x in round_med[s])))
        for impl in impls:
            s = "torch-" + impl
            print("  (%s: median of all %d calls %.1f ms, min %.1f ms)" % (
                s, len(samples[s]), common.median(samples[s]) * 1e3, min(samples[s]) * 1e3))
        print("-" * 78)
        missed = []
        if "lrc" in med:
            for impl in impls:
                s = "torch-" + impl
                r = med[s] / med["lrc"]
                print("vs %-9s %s (torch %.1f ms / lrc %.1f ms = %.2f)" % (
                    s, ("lrc is %.2fx faster" % r) if r >= 1 else ("lrc is %.2fx SLOWER" % (1 / r)),
                    med[s] * 1e3, med["lrc"] * 1e3, r))
            best = min(("torch-" + i for i in impls), key=lambda s: med[s])
            ratio = med[best] / med["lrc"]
            ok = ratio >= FORWARD_TARGET
            missed += [] if ok else ["forward"]
            print("forward target: lrc >= %.1fx the faster torch (%s): %.2fx  %s" % (
                FORWARD_TARGET, best, ratio, "PASS" if ok else "MISS"))
        else:
            print("forward target: not measured (lrc failed)")
        if compile_ms:
            c = common.median(compile_ms)
            ok = c < COMPILE_TARGET_MS
            missed += [] if ok else ["compile"]
            print("compile (Lua -> runnable code): median %.0f ms over %d invocations (%s); target < %d ms  %s" % (
                c, len(compile_ms), " ".join("%.0f" % x for x in compile_ms), COMPILE_TARGET_MS,
                "PASS" if ok else "MISS"))
        elif lrc_error is None:
            lrc_failed("lrc forward printed no 'compile: X ms' line")
        else:
            print("compile (Lua -> runnable code): not measured (lrc failed)")
        if lrc_wall:
            print("lrc process wall time per invocation (process start, compile, load, %d runs, write): median %.2f s" % (
                a.repeat, common.median(lrc_wall)))
        print("logits check: %s" % check)
        return common.finish(lrc_error, ("lrc side FAILED", "torch figures above are still valid"), a.strict, missed,
                             "target(s) missed")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    common.run_timed_main(main)
