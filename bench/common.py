#!/usr/bin/python3
"""Shared helpers of the CPU benchmarks (bench/cpu_forward.py, bench/cpu_gemm.py).

- timing: `time_command` (run a command N times, wall times), `median`;
- environment: `print_header` (date, CPU, threads, torch, BLAS actually loaded, OPENBLAS_*),
  `torch_blas` / `require_openblas` (which BLAS torch really calls, found in
  /proc/self/maps after a matmul; anything but OpenBLAS is a hard error: the reference
  BLAS is ~30x slower and makes every comparison meaningless);
- the PyTorch eager baseline: `model_config`, `random_params_f32`, `forward_f32`, built
  from the functional pieces of tests/reference/llama_ref.py but run in float32.

Must run under Debian's Python (/usr/bin/python3), which has torch 1.13 and numpy.
Run it alone for a self-check of the f32 forward against llama_ref's f64 forward:
    /usr/bin/python3 bench/common.py
"""

import ctypes
import datetime
import math
import os
import platform
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))

TORCH_HINT = ("this script needs Debian's torch: run it with /usr/bin/python3 "
              "(the pyenv `python3` on PATH has no torch)")


ORIGINAL_ENV = dict(os.environ)  # what child processes (lrc) get: the caller's environment


def set_omp_wait_policy(policy):
    """Set OMP_WAIT_POLICY for torch's OpenMP pool; must run before torch is imported.

    policy "passive" (the benchmarks' default) or "env" (leave the environment alone).
    Why: torch's OpenMP workers spin after every parallel region (libgomp's default), and
    Debian's pthreads OpenBLAS keeps its own spinning worker pool; with both pools at
    `threads` workers on a 2-core machine they steal each other's cores and the eager
    forward runs 2-4x slower (measured: 60m, B=4, T=256, 2 threads, loaded machine:
    ~3.6 s active vs ~0.9 s passive). Passive is torch's best honest configuration at
    the same thread count. Only this process is changed: lrc runs with ORIGINAL_ENV.
    Returns the value in effect.
    """
    if "torch" in sys.modules:
        raise RuntimeError("set_omp_wait_policy must run before torch is imported")
    if policy == "passive":
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    elif policy != "env":
        raise ValueError("unknown OMP wait policy %r" % policy)
    return os.environ.get("OMP_WAIT_POLICY", "(unset: libgomp default, active spinning)")


def model_run_parser(doc):
    """An ArgumentParser with what every lrc-against-torch bench takes: the model and its
    shapes, threads, rounds, the lrc binary, the OpenMP wait policy, --strict."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="60m")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--lrc", default="build/lrc", help="lrc binary (relative to the repository root)")
    ap.add_argument("--model", default="models/llama.lua")
    ap.add_argument("--omp-wait-policy", default="passive", choices=("passive", "env"),
                    help="torch side only: passive (default; see set_omp_wait_policy) or env "
                         "(leave OMP_WAIT_POLICY as the environment has it)")
    ap.add_argument("--blas-core", default="auto", choices=("auto", "env"),
                    help="torch side only: auto (default; an AVX-512 core where the CPU has AVX-512, see "
                         "choose_blas_core) or env (OpenBLAS as the environment sets it)")
    ap.add_argument("--strict", action="store_true", help="exit 4 when a target is missed")
    return ap


def import_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("error: cannot import torch (%s): %s" % (sys.executable, TORCH_HINT))
    return torch


# --------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------

def median(xs):
    xs = list(xs)
    if not xs:
        raise ValueError("median of no samples")
    return statistics.median(xs)


def time_command(cmd, n, env=ORIGINAL_ENV, cwd=REPO, check=True):
    """Run `cmd` (argv list) n times; returns (wall seconds per run, last CompletedProcess).

    With check, a non-zero exit stops at once and returns the failing run as the last one
    (the caller inspects .returncode and .stderr).
    """
    times, proc = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - t0)
        if check and proc.returncode != 0:
            break
    return times, proc


def time_call(fn, n):
    """Call fn() n times; wall seconds of each call."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


# --------------------------------------------------------------------------------------
# Environment and BLAS
# --------------------------------------------------------------------------------------

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def openblas_env():
    """OPENBLAS_* and other thread-count variables of this process's environment (reported; only
    choose_blas_core changes them, for the torch side, and says so in the header)."""
    keys = sorted(k for k in os.environ if k.startswith("OPENBLAS_"))
    keys += [k for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS") if k in os.environ]
    return {k: os.environ[k] for k in keys}


def omp_env():
    """OMP_* of this process, marking what the benchmark set itself."""
    out = []
    for k in sorted(k for k in os.environ if k.startswith(("OMP_", "GOMP_"))):
        v = os.environ[k]
        tag = "" if ORIGINAL_ENV.get(k) == v else " (set by the benchmark, torch only)"
        out.append("%s=%s%s" % (k, v, tag))
    return " ".join(out) or "(none set)"


def mapped_libraries():
    """Paths of the shared objects mapped into this process."""
    libs = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/") and ".so" in parts[5]:
                if parts[5] not in libs:
                    libs.append(parts[5])
    return libs


_BLAS_WORDS = ("blas", "lapack", "mkl", "blis", "atlas", "flexiblas")


def openblas_info(lib):
    """Config, core and thread count of a loaded OpenBLAS (ctypes.CDLL)."""
    info = {}
    for fn in ("openblas_get_config", "openblas_get_corename"):
        f = getattr(lib, fn, None)
        if f is not None:
            f.restype = ctypes.c_char_p
            info[fn[len("openblas_get_"):]] = f().decode(errors="replace").strip()
    for fn in ("openblas_get_num_threads", "openblas_get_parallel"):
        f = getattr(lib, fn, None)
        if f is not None:
            f.restype = ctypes.c_int
            info[fn[len("openblas_get_"):]] = f()
    par = info.get("parallel")
    if par is not None:
        info["parallel"] = {0: "sequential", 1: "pthreads", 2: "OpenMP"}.get(par, str(par))
    return info


def torch_blas():
    """Which BLAS torch really calls: do an f32 matmul, then look at /proc/self/maps.

    Returns a dict: libs (BLAS-like libraries mapped), openblas (path or None),
    is_openblas, and, for OpenBLAS, its config/corename/num_threads/parallel, plus
    `handle`, a ctypes.CDLL on the very library torch uses (dlopen of a loaded path
    returns the loaded instance).
    """
    torch = import_torch()
    a = torch.randn(256, 256, dtype=torch.float32)
    (a @ a).sum().item()
    libs = [p for p in mapped_libraries() if any(w in os.path.basename(p).lower() for w in _BLAS_WORDS)]
    openblas = next((p for p in libs if "libopenblas" in os.path.basename(p)), None)
    res = {"libs": libs, "openblas": openblas, "is_openblas": openblas is not None}
    if openblas:
        res["realpath"] = os.path.realpath(openblas)
        try:
            res["handle"] = ctypes.CDLL(openblas)
            res.update(openblas_info(res["handle"]))
        except OSError as e:
            res["error"] = str(e)
    return res


def require_openblas(blas):
    """Exit non-zero, loudly, unless torch's BLAS is OpenBLAS."""
    if blas.get("is_openblas"):
        return
    bar = "!" * 78
    sys.stderr.write("%s\n!!! torch is NOT using OpenBLAS: mapped BLAS-like libraries: %s\n"
                     "!!! A torch on the reference BLAS is ~30x slower; no comparison is meaningful.\n"
                     "!!! Fix: update-alternatives --config libblas.so.3-x86_64-linux-gnu "
                     "(point it at openblas-pthread).\n%s\n" % (bar, blas.get("libs") or "none", bar))
    sys.exit(3)


def set_torch_threads(n, blas=None):
    """torch.set_num_threads(n) and the same count for the OpenBLAS torch calls.

    torch's set_num_threads drives its OpenMP pool; a pthreads OpenBLAS keeps its own pool
    (default: all cores), so it is set too. Returns the count OpenBLAS then reports.
    """
    torch = import_torch()
    torch.set_num_threads(n)
    h = (blas or {}).get("handle")
    if h is not None and hasattr(h, "openblas_set_num_threads"):
        h.openblas_set_num_threads(ctypes.c_int(n))
        g = h.openblas_get_num_threads
        g.restype = ctypes.c_int
        return g()
    return None


# OpenBLAS cores without AVX-512 kernels (openblas_get_corename, lower case)
_PRE_AVX512_CORES = ("prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "sandybridge", "haswell", "zen",
                     "barcelona", "bulldozer", "piledriver", "steamroller", "excavator")


def _openblas_core_in(env):
    """The core Debian's pthreads OpenBLAS picks under env, asked of a child process
    (loading it here would fix this process's core before it can be chosen)."""
    code = ("import sys; sys.path.insert(0, %r); import common; "
            "print(common.load_openblas_pthread()[1].get('corename', ''))" % os.path.dirname(__file__))
    out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return out.stdout.strip()


def choose_blas_core(mode):
    """--blas-core auto (before torch is imported): on a CPU with AVX-512, make the torch
    side's OpenBLAS run an AVX-512 core, as DEVELOPERS.md asks of a reference. Where the
    environment pins an older core (OPENBLAS_CORETYPE=Haswell, with OPENBLAS_L2_SIZE) both
    are unset; where OpenBLAS 0.3.21 takes the CPU for an older one by itself (Prescott on
    some new Intel CPUs), OPENBLAS_CORETYPE=Cooperlake (SkylakeX without avx512_bf16) is
    set. Either way for this benchmark's process alone, which is run again with it; lrc
    keeps ORIGINAL_ENV. Returns the header's line on what was done, or None. env: as is."""
    if "LRC_BENCH_BLAS_CHOSEN" in os.environ:  # the run again
        return os.environ["LRC_BENCH_BLAS_CHOSEN"]
    flags = cpu_flags()
    if mode == "env" or "avx512f" not in flags:
        return None
    env = dict(os.environ)
    pinned = env.get("OPENBLAS_CORETYPE", "")
    if pinned.lower() in _PRE_AVX512_CORES:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    core = _openblas_core_in(env)
    if core.lower() in _PRE_AVX512_CORES:
        env["OPENBLAS_CORETYPE"] = "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
        core = _openblas_core_in(env)
    if env == dict(os.environ):
        return None
    why = "torch's OpenBLAS on core %s (%s%s; --blas-core env keeps the environment's)" % (
        core, "OPENBLAS_CORETYPE=%s pinned in the environment, unset" % pinned if pinned.lower() in _PRE_AVX512_CORES
        else "detected as an older core", "; OPENBLAS_CORETYPE=%s" % env["OPENBLAS_CORETYPE"] if "OPENBLAS_CORETYPE" in env else "")
    env["LRC_BENCH_BLAS_CHOSEN"] = why
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def load_openblas_pthread():
    """ctypes.CDLL of the pthreads OpenBLAS (Debian's libopenblas0-pthread), or exit."""
    cands = ["/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"]
    try:
        out = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            if "libopenblas.so.0" in line and "=>" in line:
                cands.append(line.split("=>", 1)[1].strip())
    except OSError:
        pass
    tried = []
    for c in cands:
        if not os.path.exists(c):
            continue
        real = os.path.realpath(c)
        tried.append(real)
        if "openblas-pthread" not in real and "libopenblasp" not in os.path.basename(real):
            continue  # the OpenMP or serial variant
        lib = ctypes.CDLL(c)
        info = openblas_info(lib)
        if info.get("parallel") not in (None, "pthreads"):
            continue
        info["path"], info["realpath"] = c, real
        return lib, info
    sys.exit("error: pthreads OpenBLAS (libopenblas0-pthread) not found; looked at %s" % (tried or cands))


def git_rev():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "") if rev else "unknown"
    except OSError:
        return "unknown"


def print_header(title, threads, blas=None, torch_blas_info=None, extra=None, torch_note=None):
    """Print the report header.

    blas: the OpenBLAS this script calls directly (dict from load_openblas_pthread);
    torch_blas_info: torch_blas()'s result; extra: list of (key, value) lines.
    """
    flags = cpu_flags()
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni") if f in flags]
    rows = [
        ("date", datetime.datetime.now().astimezone().isoformat(timespec="seconds")),
        ("host", platform.node()),
        ("cpu", "%s (%d logical cpus online; %s)" % (cpu_model(), os.cpu_count() or 0, " ".join(isa) or "?")),
        ("threads", str(threads)),
        ("lrc tree", git_rev()),
        ("python", "%s %s" % (sys.executable, platform.python_version())),
    ]
    try:
        import numpy
        rows.append(("numpy", numpy.__version__))
    except ImportError:
        pass
    if torch_blas_info is not None:
        torch = import_torch()
        rows.append(("torch", torch_note or "%s (intra-op threads %d)" % (torch.__version__, torch.get_num_threads())))
        tb = torch_blas_info
        if tb.get("is_openblas"):
            rows.append(("torch BLAS", "OpenBLAS %s" % tb.get("realpath", tb["openblas"])))
            rows.append(("  config", "%s; core %s; %s; %s threads" % (
                tb.get("config", "?"), tb.get("corename", "?"), tb.get("parallel", "?"), tb.get("num_threads", "?"))))
        else:
            rows.append(("torch BLAS", "NOT OpenBLAS: %s" % (tb.get("libs") or "none found")))
    if blas is not None:
        rows.append(("OpenBLAS", blas.get("realpath", blas.get("path", "?"))))
        rows.append(("  config", "%s; core %s; %s; %s threads" % (
            blas.get("config", "?"), blas.get("corename", "?"), blas.get("parallel", "?"), blas.get("num_threads", "?"))))
    env = openblas_env()
    rows.append(("OPENBLAS_* env", " ".join("%s=%s" % kv for kv in env.items()) or "(none set)"))
    rows.append(("OMP_* env", omp_env()))
    core = env.get("OPENBLAS_CORETYPE")
    if core and "avx512f" in flags and "avx512" not in core.lower() and core.lower() in ("haswell", "zen", "sandybridge"):
        rows.append(("NOTE", "OPENBLAS_CORETYPE=%s pins OpenBLAS to its AVX2 kernels on this AVX-512 CPU; "
                             "unpinned it would pick an AVX-512 core (a faster baseline)" % core))
    rows += list(extra or [])
    print("=" * 78)
    print(title)
    print("=" * 78)
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print("%-*s  %s" % (w, k, v))
    print("-" * 78)
    sys.stdout.flush()


# --------------------------------------------------------------------------------------
# The PyTorch eager baseline, float32
# --------------------------------------------------------------------------------------

def _lua_presets():
    """Presets of models/llama.lua: llama_ref's table plus the byte-level and depth ones."""
    import llama_ref
    p = {k: (dict(zip(("d_model", "n_layers", "n_heads", "d_ff", "vocab"), v)))
         for k, v in llama_ref.PRESETS.items()}
    p["tiny"] = dict(d_model=32, n_layers=2, n_heads=2, d_ff=88, vocab=256)
    p["small"] = dict(d_model=128, n_layers=4, n_heads=4, d_ff=352, vocab=256)
    for L in (48, 96, 192, 256, 384, 512):
        p["depth-L%d" % L] = dict(d_model=128, n_layers=L, n_heads=4, d_ff=352, vocab=32000,
                                  layerrope_beta=0.0, layerrope_beta_rot=0.0, layerrope_base=10000.0)
    return p


PRESETS = None


def model_config(preset="60m", norm="pre", **overrides):
    """llama_ref.Config of a preset of models/llama.lua, with `norm` and overrides."""
    global PRESETS
    import llama_ref
    if PRESETS is None:
        PRESETS = _lua_presets()
    if preset not in PRESETS:
        raise SystemExit("error: unknown preset %r (known: %s)" % (preset, ", ".join(PRESETS)))
    if norm not in llama_ref.PLACEMENTS:
        raise SystemExit("error: unknown norm %r (known: %s)" % (norm, ", ".join(llama_ref.PLACEMENTS)))
    kw = dict(PRESETS[preset])
    kw.update(overrides)
    return llama_ref.Config(norm=norm, **kw)


def random_params_f32(cfg, seed=0):
    """Parameters for a speed run: weights N(0, 0.02), norm gains (and LayerRoPE gammas) 1,
    LayerRoPE scalars at their config init values; all float32."""
    torch = import_torch()
    import llama_ref
    g = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in llama_ref.param_shapes(cfg).items():
        if len(shape) == 0:  # model.layerrope.{site}_{alpha,beta,alpha_rot,beta_rot}
            key = None
            scalar = name.rsplit(".", 1)[1]  # e.g. in_attn_alpha_rot
            for s in ("alpha_rot", "beta_rot", "alpha", "beta"):
                if scalar.endswith("_" + s):
                    key = "layerrope_" + s
                    break
            params[name] = torch.tensor(float(getattr(cfg, key)), dtype=torch.float32)
        elif len(shape) == 1:  # RMSNorm weights, LayerRoPE gammas
            params[name] = torch.ones(shape, dtype=torch.float32)
        else:
            params[name] = torch.empty(shape, dtype=torch.float32).normal_(0.0, 0.02, generator=g)
    return params


def forward_f32(params, tokens, cfg):
    """Logits [B, T, V] in float32: llama_ref.forward without its float64 upcast.

    llama_ref.forward converts every parameter with `.to(torch.float64)` and then runs the
    functional pieces, which compute in the dtype they are given (RoPE and the LayerRoPE
    gains build their angles in f64 and cast to the activation dtype). Here the parameters
    stay float32, so every op (GEMMs, attention, norms) runs in f32. Call under
    torch.no_grad() (see make_torch_forward).
    """
    torch = import_torch()
    import llama_ref
    p = params
    h = llama_ref.embedding(tokens, p["model.embed_tokens.weight"])
    for l in range(cfg.n_layers):
        pre = "model.layers.%d." % l
        h = llama_ref.half_step(h, lambda x: llama_ref.attention(x, p, pre, cfg), l, 0, p, cfg)
        h = llama_ref.half_step(h, lambda x: llama_ref.mlp(x, p, pre), l, 1, p, cfg)
    h = llama_ref.rms_normalize(h, cfg.eps) * p["model.norm.weight"]
    out = llama_ref.linear(h, p["lm_head.weight"])
    assert out.dtype == torch.float32, out.dtype
    return out


class NNForward:
    """The same f32 forward written the way a PyTorch user would (the "nn" baseline).

    Same math as forward_f32 (checked against it by cpu_forward.py before timing), but with
    torch's fused eager ops where they exist: F.linear, F.embedding, torch.rsqrt RMSNorm,
    torch.softmax with an additive causal mask, F.silu, batched matmul attention, and the
    RoPE cos/sin tables and the mask built once per sequence length (as HF LLaMA caches
    them). torch 1.13 has no scaled_dot_product_attention. Call under torch.no_grad().
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self._tables = {}

    def tables(self, T):
        torch = import_torch()
        if T not in self._tables:
            Dh = self.cfg.head_dim
            half = Dh // 2
            i = torch.arange(half, dtype=torch.float64)
            inv = torch.tensor(float(self.cfg.rope_base), dtype=torch.float64) ** (-2.0 * i / Dh)
            ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
            cos = torch.cos(ang).float()[None, None]  # [1, 1, T, half] for [B, H, T, Dh]
            sin = torch.sin(ang).float()[None, None]
            mask = torch.full((T, T), float("-inf"), dtype=torch.float32).triu(1)
            self._tables[T] = (cos, sin, mask)
        return self._tables[T]

    def norm(self, x):
        torch = import_torch()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.eps)

    def attention(self, x, p, pre):
        torch = import_torch()
        import torch.nn.functional as F
        B, T, d = x.shape
        H, Dh = self.cfg.n_heads, self.cfg.head_dim
        half = Dh // 2
        cos, sin, mask = self.tables(T)

        def heads(name):
            return F.linear(x, p[pre + "self_attn.%s.weight" % name]).view(B, T, H, Dh).transpose(1, 2)

        def rope(t):
            t1, t2 = t[..., :half], t[..., half:]
            return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], dim=-1)
        o = self.attend(rope(heads("q_proj")), rope(heads("k_proj")), heads("v_proj"), mask)
        return F.linear(o.transpose(1, 2).reshape(B, T, d), p[pre + "self_attn.o_proj.weight"])

    def attend(self, q, k, v, mask):
        """Causal attention of q, k, v [B, H, T, Dh] (mask: the additive causal mask)."""
        torch = import_torch()
        s = torch.matmul(q, k.transpose(-1, -2)).mul_(1.0 / math.sqrt(q.shape[-1])).add_(mask)
        return torch.matmul(torch.softmax(s, dim=-1), v)

    def mlp(self, x, p, pre):
        import torch.nn.functional as F
        g = F.linear(x, p[pre + "mlp.gate_proj.weight"])
        u = F.linear(x, p[pre + "mlp.up_proj.weight"])
        return F.linear(F.silu(g).mul_(u), p[pre + "mlp.down_proj.weight"])

    def half_step(self, h, block, layer, which, p):
        import llama_ref
        cfg, N = self.cfg, self.norm
        norm = cfg.norm
        pre = "model.layers.%d." % layer
        if llama_ref._READ_NORMS.get(norm):
            w = p[pre + llama_ref._READ_NORMS[norm][which] + ".weight"]
        if norm == "pre":
            return h + block(N(h) * w)
        if norm == "lns":
            return h + block(N(h) * (w / math.sqrt(layer + 1.0)))
        if norm == "peri":
            w_out = p[pre + llama_ref._WRITE_NORMS["peri"][which] + ".weight"]
            return h + N(block(N(h) * w)) * w_out
        if norm == "post":
            return N(h + block(h)) * w
        if norm == "deepnet":
            return N(llama_ref.deepnet_alpha(cfg) * h + block(h)) * w
        site_in, site_out = (("in_attn", "out_attn"), ("in_mlp", "out_mlp"))[which]
        g_in = llama_ref.layerrope_gain(p, site_in, layer, cfg)
        g_out = llama_ref.layerrope_gain(p, site_out, layer, cfg)
        if norm == "layerrope":
            return h + g_out * block(N(h) * g_in)
        if norm == "layerrope_peri":
            return h + N(block(N(h) * g_in)) * g_out
        raise ValueError("unknown norm placement %r" % norm)

    def __call__(self, p, tokens):
        import torch.nn.functional as F
        cfg = self.cfg
        h = F.embedding(tokens.long(), p["model.embed_tokens.weight"])
        for l in range(cfg.n_layers):
            pre = "model.layers.%d." % l
            h = self.half_step(h, lambda x: self.attention(x, p, pre), l, 0, p)
            h = self.half_step(h, lambda x: self.mlp(x, p, pre), l, 1, p)
        h = self.norm(h) * p["model.norm.weight"]
        return F.linear(h, p["lm_head.weight"])


def check_params_f32(params, cfg):
    """Same names and shapes as the model, all float32 (converted), else exit."""
    torch = import_torch()
    import llama_ref
    expected = llama_ref.param_shapes(cfg)
    if set(params) != set(expected):
        missing = sorted(set(expected) - set(params))[:5]
        extra = sorted(set(params) - set(expected))[:5]
        raise SystemExit("error: parameter mismatch: missing %s, unexpected %s" % (missing, extra))
    out = {}
    for name, t in params.items():
        if tuple(t.shape) != tuple(expected[name]):
            raise SystemExit("error: %s has shape %s, expected %s" % (name, tuple(t.shape), expected[name]))
        out[name] = t.to(torch.float32).contiguous()
    return out


TORCH_IMPLS = ("ref", "nn")


def make_torch_forward(cfg, params, tokens, impl="ref"):
    """A no-argument callable running an f32 eager forward under torch.no_grad().

    impl "ref": forward_f32 (llama_ref's functional pieces, in f32); "nn": NNForward.
    """
    torch = import_torch()
    if impl == "ref":
        def run():
            with torch.no_grad():
                return forward_f32(params, tokens, cfg)
    elif impl == "nn":
        fwd = NNForward(cfg)

        def run():
            with torch.no_grad():
                return fwd(params, tokens)
    else:
        raise ValueError("unknown torch impl %r" % impl)
    return run


def random_tokens(cfg, batch, seq, seed=0):
    torch = import_torch()
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, cfg.vocab, (batch, seq), generator=g, dtype=torch.int32)


def forward_flops(cfg, batch, seq):
    """Multiply-add FLOPs (2 per MAC) of one forward: linear layers and attention (causal
    attention counted in full, as most reports do)."""
    d, ff, L, V = cfg.d_model, cfg.d_ff, cfg.n_layers, cfg.vocab
    M = batch * seq
    lin = 2 * M * (L * (4 * d * d + 3 * d * ff) + V * d)
    att = L * 2 * 2 * batch * seq * seq * d
    return lin, att


def rel_err(got, ref):
    """max |got - ref| / max |ref|, in f64."""
    got, ref = got.double(), ref.double()
    return ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def run_timed_main(main):
    """Runs a bench's main(), prints its total wall time last and exits with its status."""
    t0 = time.time()
    rc = main()
    print("total %.0f s" % (time.time() - t0))
    sys.exit(rc)


def finish(lrc_error, lrc_failed, strict, missed, missed_what):
    """The closing lines every bench prints and its exit status: 1 when the
    lrc side failed (the reference figures still stand), 4 when --strict and a
    target was missed, else 0."""
    print("load avg: %s (end)" % loadavg())
    if lrc_error is not None:
        print("RESULT: %s (%s); %s" % (lrc_failed[0], lrc_error, lrc_failed[1]))
        return 1
    if strict and missed:
        print("RESULT: %s: %s" % (missed_what, ", ".join(missed)))
        return 4
    return 0


def _self_check():
    torch = import_torch()
    import llama_ref
    for norm in llama_ref.PLACEMENTS:
        cfg = model_config("tiny", norm)
        p = random_params_f32(cfg, seed=3)
        # bigger weights than N(0, 0.02) so that every block matters
        p = {k: (v * 10 if v.dim() == 2 and not k.endswith("embed_tokens.weight") else v) for k, v in p.items()}
        tok = random_tokens(cfg, 2, 9, seed=3)
        ref = llama_ref.forward(p, tok, cfg)
        for impl in TORCH_IMPLS:
            got = make_torch_forward(cfg, p, tok, impl)()
            err = rel_err(got, ref)
            print("f32 %-3s forward vs llama_ref f64, %-15s max|diff|/max|ref| = %.2e" % (impl, norm, err))
            assert got.dtype == torch.float32 and err < 1e-5, (impl, norm, err)
    print("self-check passed")


if __name__ == "__main__":
    _self_check()
