#!/usr/bin/python3
"""Issue 50's seven architectures: lrc's CPU forward and training step against PyTorch eager (f32).

    "$LRC_HF_PYTHON" bench/arch_speed.py [--archs mamba,bert_padded,...] [--batch 4] [--seq 256]
        [--threads 2] [--rounds 3] [--repeat 5] [--steps 6] [--lrc build/lrc]

The torch side is the reference code the fixtures of tests/fixtures/arch come from
(tests/reference/make_arch_fixtures.py): transformers' MambaForCausalLM, BertForMaskedLM,
WhisperForCausalLM, RwkvForCausalLM and GPTNeoXForCausalLM, on their CPU paths (Mamba's and
RWKV's are a loop over T in PyTorch: no fused kernel exists for the CPU), and the paper
references diff_attn_ref.py and mla_ref.py; every model at d 256, 2 layers (BENCH below).
The lrc side is examples/architectures/NAME.lua at the same configuration. Both compute the
same function: lrc init writes the weights, torch loads them, and the logits are compared.

Per architecture, interleaved in rounds (torch, lrc, torch, lrc, ...):
  * forward: torch under no_grad, --repeat timed calls after one warm-up; lrc forward
    --target cpu --repeat R (its printed median);
  * training step: torch forward, next-token cross-entropy over every position, backward,
    AdamW (lr 1e-4, as lrc's default betas and eps, no decay), zero_grad (as many timed calls
    as fit in 10 s, at most --repeat; a step over 30 s, transformers' Mamba, in the first round
    only); lrc train --steps S
    on random bytes (step 1 dropped; its metrics' tokens/s per step). lrc's inputs besides the
    tokens (a padding mask, encoder states) take their declared defaults there, torch's are
    the forward's.
Each side's figure is the median of its per-round medians; the ratio is torch / lrc (above 1:
lrc faster). Then `lrc profile` of the forward of the architectures with a scan prints the
scan kernels' GB/s against the copy rate it probes (the issue's target: 50% or more), and
the FMA peak beside it.

Exit status: 0 measured (targets reported; --strict: 4 when one is missed), 1 lrc failed or
disagrees with torch, 3 torch is not on OpenBLAS.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import common  # noqa: E402

TARGET = 1.0       # lrc at least as fast as torch eager, forward and step (issue 50)
SCAN_TARGET = 0.5  # the scan kernels at 50% or more of the copy rate
D, LAYERS, VOCAB, ENC_T = 256, 2, 512, 128

# lrc's --set lines per architecture: the configuration of BENCH's torch model
LRC_SETS = {
    "mamba": dict(d_model=D, n_layers=LAYERS, vocab=VOCAB, d_inner=2 * D, d_state=16, d_conv=4, dt_rank=16),
    "bert_padded": dict(d_model=D, n_layers=LAYERS, n_heads=4, d_ff=4 * D, vocab=VOCAB, n_positions=512),
    "whisper_cross": dict(d_model=D, n_layers=LAYERS, n_heads=4, d_ff=4 * D, vocab=VOCAB, n_positions=512,
                          enc_len=ENC_T),
    "diff_attn": dict(d_model=D, n_layers=LAYERS, n_heads=4, head_dim=32, d_ff=688, vocab=VOCAB),
    "mla": dict(d_model=D, n_layers=LAYERS, n_heads=4, q_lora_rank=96, kv_lora_rank=64, qk_nope_dim=48,
                qk_rope_dim=16, v_head_dim=32, d_ff=688, vocab=VOCAB),
    "rwkv4": dict(d_model=D, n_layers=LAYERS, d_ff=4 * D, vocab=VOCAB),
    "gpt_neox": dict(d_model=D, n_layers=LAYERS, n_heads=4, d_ff=4 * D, vocab=VOCAB, rotary_pct=0.25),
}
SCANS = ("mamba", "rwkv4")


def torch_model(name, B, T):
    """(model, inputs, forward(model, inputs) -> logits) of name at the bench's size, in f32."""
    import torch
    import transformers
    import diff_attn_ref
    import mla_ref

    def hf(cls_name, **kw):
        cfg = getattr(transformers, cls_name)(**kw)
        cfg._attn_implementation = "eager"
        return cfg
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, VOCAB, (B, T), generator=g)
    lm = lambda m, i: m(input_ids=i["tokens"], use_cache=False).logits  # noqa: E731
    inputs = {"tokens": tokens}
    if name == "mamba":
        m = transformers.MambaForCausalLM(hf("MambaConfig", vocab_size=VOCAB, hidden_size=D, state_size=16,
                                             num_hidden_layers=LAYERS, expand=2, conv_kernel=4, time_step_rank=16,
                                             layer_norm_epsilon=1e-5, residual_in_fp32=False, use_cache=False))
        fwd = lm
    elif name == "bert_padded":
        m = transformers.BertForMaskedLM(hf("BertConfig", vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS,
                                            num_attention_heads=4, intermediate_size=4 * D,
                                            max_position_embeddings=512, hidden_act="gelu", pad_token_id=0))
        mask = torch.ones(B, T)
        for b in range(B):  # every other sequence padded to 3/4 of T
            if b % 2:
                mask[b, 3 * T // 4:] = 0
                tokens[b, 3 * T // 4:] = 0
        inputs.update(attention_mask=mask, token_type_ids=torch.zeros(B, T, dtype=torch.long))
        fwd = lambda m, i: m(input_ids=i["tokens"], attention_mask=i["attention_mask"],  # noqa: E731
                             token_type_ids=i["token_type_ids"]).logits
    elif name == "whisper_cross":
        m = transformers.WhisperForCausalLM(hf("WhisperConfig", vocab_size=VOCAB, d_model=D, decoder_layers=LAYERS,
                                               decoder_attention_heads=4, decoder_ffn_dim=4 * D,
                                               max_target_positions=512, encoder_layers=1, encoder_attention_heads=4,
                                               encoder_ffn_dim=4 * D, max_source_positions=512, num_mel_bins=8,
                                               pad_token_id=0, bos_token_id=1, eos_token_id=1,
                                               decoder_start_token_id=1, suppress_tokens=None,
                                               begin_suppress_tokens=None, activation_function="gelu",
                                               use_cache=False))
        inputs["encoder_states"] = torch.randn(B, ENC_T, D, generator=g)
        fwd = lambda m, i: m(input_ids=i["tokens"], encoder_outputs=(i["encoder_states"],),  # noqa: E731
                             use_cache=False).logits
    elif name == "diff_attn":
        m = diff_attn_ref.DiffTransformer(diff_attn_ref.bench_config())
        fwd = lambda m, i: m(i["tokens"])  # noqa: E731
    elif name == "mla":
        m = mla_ref.MLAModel(mla_ref.bench_config())
        fwd = lambda m, i: m(i["tokens"])  # noqa: E731
    elif name == "rwkv4":
        m = transformers.RwkvForCausalLM(hf("RwkvConfig", vocab_size=VOCAB, context_length=512, hidden_size=D,
                                            num_hidden_layers=LAYERS, intermediate_size=4 * D,
                                            layer_norm_epsilon=1e-5, rescale_every=0, tie_word_embeddings=False,
                                            bos_token_id=0, eos_token_id=0, use_cache=False))
        fwd = lm
    elif name == "gpt_neox":
        m = transformers.GPTNeoXForCausalLM(hf("GPTNeoXConfig", vocab_size=VOCAB, hidden_size=D,
                                               num_hidden_layers=LAYERS, num_attention_heads=4,
                                               intermediate_size=4 * D, rotary_pct=0.25, rotary_emb_base=10000,
                                               max_position_embeddings=512, use_parallel_residual=True,
                                               layer_norm_eps=1e-5, hidden_act="gelu", attention_bias=True,
                                               tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
                                               use_cache=False))
        fwd = lm
    else:
        raise ValueError(name)
    return m.float().eval(), inputs, fwd


# ---- safetensors, f32 and i32 only ----

def st_read(path):
    import numpy as np
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        dt = {"F32": np.float32, "I32": np.int32}[v["dtype"]]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=dt).reshape(v["shape"])
    return out


def st_write(path, tensors):
    head, blobs, off = {}, [], 0
    for k, a in tensors.items():
        raw = a.tobytes()
        head[k] = {"dtype": {"float32": "F32", "int32": "I32"}[str(a.dtype)], "shape": list(a.shape),
                   "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load_weights(model, path):
    """lrc init's weights into model: every tensor of the file must be one of its parameters of
    the same shape; a parameter the file lacks must share storage with one it has (tied)."""
    import torch
    w = st_read(path)
    # every name of each parameter, a tied one's included (state_dict keeps them)
    params = {k: v for k, v in model.state_dict(keep_vars=True).items() if isinstance(v, torch.nn.Parameter)}
    missing = [k for k in w if k not in params]
    if missing:
        raise RuntimeError("lrc's weights hold tensors the torch model lacks: %s" % ", ".join(missing[:5]))
    with torch.no_grad():
        for k, a in w.items():
            if tuple(params[k].shape) != a.shape:
                raise RuntimeError("%s: lrc %s, torch %s" % (k, a.shape, tuple(params[k].shape)))
            params[k].copy_(torch.from_numpy(a.copy()))
    loaded = {params[k].data_ptr() for k in w}
    untied = [k for k, p in params.items() if k not in w and p.data_ptr() not in loaded]
    if untied:
        raise RuntimeError("torch parameters lrc's weights do not give: %s" % ", ".join(untied[:5]))


def sets(name):
    out = []
    for k, v in LRC_SETS[name].items():
        out += ["--set", "%s=%s" % (k, v)]
    return out


def run(cmd, env=None):
    p = subprocess.run(cmd, cwd=common.REPO, env=dict(common.ORIGINAL_ENV, **(env or {})), capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise RuntimeError("%s\nexit %d\n%s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout)[-2000:]))
    return p.stderr + p.stdout


RE_FORWARD = re.compile(r"forward:\s*median\s+([0-9.eE+-]+)\s*ms")


def torch_step(model, inputs, fwd):
    import torch
    import torch.nn.functional as F
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    labels = torch.roll(inputs["tokens"], -1, dims=1)
    model.train()
    for mod in model.modules():  # no dropout: the same function as lrc's
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0

    def step():
        logits = fwd(model, inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def bench_arch(name, a, lrc, work, text):
    """{side: [per-round median seconds]} for name's forward and step on both sides."""
    import numpy as np
    import torch
    model, inputs, fwd = torch_model(name, a.batch, a.seq)
    model_lua = os.path.join(common.REPO, "examples", "architectures", name + ".lua")
    w = os.path.join(work, name + ".safetensors")
    run([lrc, "init", model_lua] + sets(name) + ["--seed", "0", "-o", w])
    load_weights(model, w)
    inp = os.path.join(work, name + "-in.safetensors")
    st_write(inp, {k: (v.numpy().astype(np.int32) if v.dtype in (torch.int64, torch.int32)
                       else v.numpy().astype(np.float32)) for k, v in inputs.items()})
    out = os.path.join(work, name + "-out.safetensors")
    base = [lrc, "forward", model_lua] + sets(name) + ["--weights", w, "--input", inp, "-o", out,
                                                          "--target", "cpu", "--threads", str(a.threads)]
    run(base)
    with torch.no_grad():
        want = fwd(model, inputs).float()
    got = torch.from_numpy(st_read(out)["logits"].copy())
    err = float((got - want).abs().max() / want.abs().max())
    print("%s: lrc's logits against torch's: max |diff| / max |torch| = %.1e" % (name, err))
    if not err < 1e-3:
        raise RuntimeError("%s: lrc and torch compute other functions (%.1e)" % (name, err))
    step = torch_step(model, inputs, fwd)
    warm = common.time_call(step, 1)[0]  # warm-up: AdamW's state
    # transformers' Mamba trains through a Python loop over T (about 100 s a
    # step here): a step that slow is timed once, in the first round alone
    step_repeat, slow = max(1, min(a.repeat, int(10 / warm))), warm > 30
    rounds = {k: [] for k in ("torch fwd", "lrc fwd", "torch step", "lrc step")}
    for r in range(a.rounds):
        with torch.no_grad():
            model.eval()
            fwd(model, inputs)
            rounds["torch fwd"].append(common.median(common.time_call(lambda: fwd(model, inputs), a.repeat)))
        m = RE_FORWARD.search(run(base + ["--repeat", str(a.repeat)]))
        if not m:
            raise RuntimeError("lrc forward printed no median")
        rounds["lrc fwd"].append(float(m.group(1)) / 1e3)
        if not (slow and r > 0):
            rounds["torch step"].append(common.median(common.time_call(step, step_repeat)))
        rd = os.path.join(work, "run-%s-%d" % (name, r))
        run([lrc, "train", model_lua] + sets(name) + [
            "--steps", str(a.steps), "--lr", "1e-4", "--batch", str(a.batch), "--seq", str(a.seq),
            "--eval-every", str(a.steps), "--threads", str(a.threads), "--data", text, "-o", rd])
        with open(os.path.join(rd, "metrics.jsonl")) as f:
            tps = [json.loads(line)["tokens_per_s"] for line in f if '"tokens_per_s"' in line]
        shutil.rmtree(rd, ignore_errors=True)
        rounds["lrc step"].append(common.median([a.batch * a.seq / x for x in tps[1:]]))
        # a side timed in the first round alone (slow) is printed there alone
        print("  round %d/%d: %s" % (r + 1, a.rounds, "; ".join("%s %.1f ms" % (k, v[-1] * 1e3)
                                                               for k, v in rounds.items() if len(v) == r + 1)))
        sys.stdout.flush()
    return rounds, inp, w


RE_CEIL = re.compile(r"ceilings measured now: ([0-9.]+) GFLOP/s \(FMA probe\), ([0-9.]+) GB/s \(copy\)")
RE_ROW = re.compile(r"^(\S+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)%\s+([0-9.]+)\s+([0-9.]+)\s+(\d+)%([FB])\s+(.*)$")


def scan_profile(name, a, lrc, inp, w):
    """(copy GB/s, FMA GFLOP/s, [(kernel, share of time, GB/s)]) of the scan kernels of name's forward."""
    model_lua = os.path.join(common.REPO, "examples", "architectures", name + ".lua")
    out = run([lrc, "profile", model_lua] + sets(name) + [
        "--weights", w, "--input", inp, "--threads", str(a.threads), "--repeat", str(a.repeat),
        "-o", os.path.join(os.path.dirname(w), name + "-trace.json")])
    c = RE_CEIL.search(out)
    if not c:
        raise RuntimeError("lrc profile printed no ceilings")
    rows = []
    for line in out.splitlines():
        m = RE_ROW.match(line.strip())
        if m and re.search(r"\bscan\b", m.group(9)):
            rows.append((m.group(1), float(m.group(4)), float(m.group(6)), m.group(9)))
    return float(c.group(2)), float(c.group(1)), rows


def main():
    ap = common.model_run_parser(__doc__)
    ap.add_argument("--archs", default=",".join(LRC_SETS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6, help="lrc train steps per round (step 1 dropped)")
    a = ap.parse_args()
    a.archs = a.archs.split(",")
    bad = [x for x in a.archs if x not in LRC_SETS]
    if bad or min(a.repeat, a.rounds, a.threads, a.batch, a.seq) < 1 or a.steps < 2:
        ap.error("unknown architecture %s, or a count below 1 (--steps below 2)" % ",".join(bad))
    chosen = common.choose_blas_core(a.blas_core)
    common.set_omp_wait_policy(a.omp_wait_policy)
    torch = common.import_torch()
    blas = common.torch_blas()
    common.require_openblas(blas)
    blas["num_threads"] = common.set_torch_threads(a.threads, blas)
    torch.manual_seed(0)
    lrc = a.lrc if os.path.isabs(a.lrc) else os.path.join(common.REPO, a.lrc)
    common.print_header("issue 50's architectures: lrc CPU forward and training step vs PyTorch eager (f32)",
                        a.threads, torch_blas_info=blas, extra=[
                            ("shape", "batch %d x seq %d, d %d, %d layers, vocab %d" % (a.batch, a.seq, D, LAYERS,
                                                                                      VOCAB)),
                            ("schedule", "%d rounds; torch %d timed calls; lrc forward --repeat %d, train --steps %d "
                                         "(step 1 dropped)" % (a.rounds, a.repeat, a.repeat, a.steps)),
                            ("lrc", lrc),
                            ("BLAS core", chosen or "as the environment has it (--blas-core %s)" % a.blas_core),
                            ("load avg", common.loadavg() + " (start)")])
    work = tempfile.mkdtemp(prefix="lrc-arch-bench-")
    results, missed, lrc_error, scans = {}, [], None, {}
    try:
        text = os.path.join(work, "text.bin")
        with open(text, "wb") as f:
            f.write(os.urandom(1 << 20))
        for name in a.archs:
            try:
                rounds, inp, w = bench_arch(name, a, lrc, work, text)
                results[name] = {k: common.median(v) for k, v in rounds.items()}
                if name in SCANS:
                    scans[name] = scan_profile(name, a, lrc, inp, w)
            except RuntimeError as e:
                lrc_error = "%s failed" % name
                print("FAILED: %s" % e)
        print("-" * 78)
        print("%-14s %9s %9s %7s   %9s %9s %7s" % ("architecture", "torch fwd", "lrc fwd", "ratio",
                                                  "torch step", "lrc step", "ratio"))
        for name, r in results.items():
            fr, sr = r["torch fwd"] / r["lrc fwd"], r["torch step"] / r["lrc step"]
            missed += ([name + " forward"] if fr < TARGET else []) + ([name + " step"] if sr < TARGET else [])
            print("%-14s %7.1fms %7.1fms %6.2fx   %8.1fms %7.1fms %6.2fx" % (
                name, r["torch fwd"] * 1e3, r["lrc fwd"] * 1e3, fr, r["torch step"] * 1e3, r["lrc step"] * 1e3, sr))
        print("(ratio: torch / lrc, median of %d rounds each; target >= %.1fx; torch's BLAS core: %s)" % (
            a.rounds, TARGET, blas.get("corename", "?")))
        for name, (copy, fma, rows) in scans.items():
            print("%s's scan kernels (lrc profile; copy rate %.1f GB/s, FMA peak %.1f GFLOP/s):" % (name, copy, fma))
            for fn, share, gbs, what in rows:
                ok = gbs >= SCAN_TARGET * copy
                missed += [] if ok else ["%s %s" % (name, fn)]
                print("  %-10s %5.1f%% of the time  %6.1f GB/s = %3.0f%% of the copy rate  %s  %s" % (
                    fn, share, gbs, 100 * gbs / copy, "PASS" if ok else "MISS", what))
            if not rows:
                lrc_error = "%s has no scan kernel in its profile" % name
        return common.finish(lrc_error, ("lrc side FAILED", "the rows above still stand"), a.strict, missed,
                             "target(s) missed")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    common.run_timed_main(main)
