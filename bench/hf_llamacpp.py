#!/usr/bin/python3
"""lrc export --hf run in llama.cpp, side by side with lrc at f32, bf16 and q8 (llama.cpp's Q8_0).

    /usr/bin/python3 bench/hf_llamacpp.py --llamacpp-build DIR --converter .../convert_hf_to_gguf.py
        [--lrc build/lrc] [--hf-python PY] [--preset 60m] [--norm layerrope]
        [--vocab 256] [--pp 128] [--tg 64] [--threads 2] [--rounds 3] [--repeat 3] [--keep DIR]
        [--tokenizer auto|exported|byte-fallback] [--also-passive]

--hf-python: a Python with transformers (and sentencepiece, protobuf) for the converter;
default $LRC_HF_PYTHON (bench/cpu_llamacpp.sh makes one and passes it).

1. `lrc init llama --preset P --set norm=N --set vocab=V --seed 0 -o W` (a byte-level
   model; with V > 256 the ids past 255 are tokens no text encodes to, as a 32 000-token
   LLaMA's lm_head and embedding sizes are what decoding streams) and `lrc export W llama
   ... --hf EXP`.
2. llama.cpp's own, unmodified convert_hf_to_gguf.py (run through bench/hf_llamacpp_shim.py,
   which only names the dtypes torch 1.13 lacks) turns EXP into f32, bf16 and q8_0 GGUF files.
   The converter sends a tokenizer.json like lrc's (BPE, ByteLevel, no merges) to its GPT-2
   path, which identifies the pre-tokenizer by a hash of a test string's encoding and
   refuses every hash it does not list. --tokenizer auto (the default) tries EXP as exported
   first; when the converter refuses it, it prints why and runs an EXPERIMENT, clearly
   labelled: a copy of EXP whose tokenizer.json and tokenizer_config.json are rewritten
   (byte_fallback_tokenizer below) into the shape of Llama 2's tokenizer.json, which the
   converter takes to its Llama path (LlamaHfVocab: a SentencePiece-style vocabulary, no
   hash), padded with unreachable tokens to V entries; the weights and config.json are
   EXP's, untouched.
3. Logits: bench/hf_llamacpp_logits.cpp (llama.h's public API only, built here with g++
   against the llama.cpp build) tokenizes a prompt with the GGUF's own tokenizer and writes
   the logits of every position; lrc computes the same ids with `lrc forward` of the
   un-exported model (LayerRoPE as trained, --target ref). It prints whether llama.cpp's
   ids are the prompt's bytes and the largest |difference| of the logits: f32 with
   llama.cpp's defaults (f16 KV cache, flash attention auto, which on the CPU is on and
   costs ~1e-4 here), f32 with an f32 KV cache, f32 with f32 KV and no flash attention
   (the like-for-like f32 comparison), and q8_0 with the defaults.
4. Speed, interleaved in rounds (llama.cpp f32, lrc f32, llama.cpp bf16, lrc bf16, llama.cpp
   q8_0, lrc q8, ...), same threads; lrc's packages are compiled with --weights-dtype f32,
   bf16 and q8 (Q8_0's layout: int8 with an f16 scale per 32 along the reduction axis):
     llama.cpp: llama-bench -m GGUF -p PP -n TG -t THREADS -r REPEAT -o json
                (pp: one batch of PP tokens; tg: TG tokens decoded one at a time);
     lrc pp:    lrc forward PKG --repeat REPEAT, PKG = lrc compile --target cpu --seq PP
                --logits last (prints the median ms of one [1, PP] forward). llama-bench's pp
                batch asks for the last position's logits alone, as a prompt's processing
                does, so llama.cpp runs its LM head for one row; --logits last has lrc do
                the same work (its logits are the full forward's last row, bit for bit);
     lrc tg:    lrc generate DEC --prompt-ids ID -n TG --temperature 0, DEC = lrc compile
                --target cpu --ctx 1+TG (prints tokens/s on stderr).
   llama.cpp runs in its default environment: the caller's, without OMP_WAIT_POLICY (see
   llamacpp_env). Each figure is the median over rounds of the per-round medians; it prints the ratios
   lrc / llama.cpp for pp and tg at each precision. --also-passive also runs llama-bench with
   OMP_WAIT_POLICY=PASSIVE in each round and prints those figures on lines of their own,
   labelled "extra, not llama.cpp's default", which no ratio above uses. A precision llama.cpp cannot run here
   (llama-bench dies, as with SIGILL on an instruction the virtual CPU lacks) is reported as
   such, with its error, and has no ratio; the others are still measured.
Exit status: 0 measured, 1 something failed (printed as RESULT).
"""

import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

sys.path.insert(0, os.path.join(common.REPO, "tests", "tools"))
import st  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = " Hello,  llama.cpp!\n\tThe quick brown fox jumps over 13 lazy dogs \u2014 caf\u00e9 \u2713 "


def byte_fallback_tokenizer(n_vocab=256):
    """The tokenizer.json that llama.cpp's converter takes, for the same byte-level ids.

    Llama 2's shape: model BPE with byte_fallback true and no merges, a vocabulary of the
    byte tokens "<0x00>".."<0xFF>" (id = the byte) except id 32, which is "\u2581"
    (SentencePiece's space), a normalizer Replace(" " -> "\u2581"), no pre-tokenizer, and
    a decoder Sequence [Replace("\u2581" -> " "), ByteFallback, Fuse]. transformers then
    encodes any text to its UTF-8 bytes (a character not in the vocabulary falls back to
    its bytes; a space is normalized to "\u2581" = 32); the converter's LlamaHfVocab
    accepts it (BPE, byte_fallback, decoder Sequence) and writes a SentencePiece ("llama")
    vocabulary whose "<0xNN>" tokens are BYTE tokens, no pre-tokenizer hash involved.
    llama.cpp's SentencePiece tokenizer always turns spaces into "\u2581" before looking
    tokens up, hence id 32 = "\u2581" (with "<0x20>" a space would become the three
    bytes of U+2581). One loss: a literal U+2581 in a text encodes to 32. Ids 256 and up
    (n_vocab > 256) are "<unused_N>" tokens, in the vocabulary but reached by no merge.
    """
    vocab = {("\u2581" if b == 0x20 else "<0x%02X>" % b): b for b in range(256)}
    vocab.update({"<unused_%d>" % i: i for i in range(256, n_vocab)})
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": None, "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": True,
                  "vocab": vocab, "merges": []},
    }


# tokenizer_config.json beside it: no BOS/EOS added (the converter writes add_bos_token false,
# or llama.cpp's SentencePiece default prepends id 1), no leading space (add_prefix_space
# false, or llama.cpp prepends "\u2581" = 32).
BYTE_FALLBACK_TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
                                  "add_bos_token": False, "add_eos_token": False, "add_prefix_space": False}


def run(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=common.REPO, env=env or common.ORIGINAL_ENV, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return p, time.perf_counter() - t0


def must(p, what):
    if p.returncode != 0:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-3:]
        how = "killed by %s" % signal.Signals(-p.returncode).name if p.returncode < 0 else "exit %d" % p.returncode
        raise RuntimeError("%s failed (%s): %s" % (what, how, " | ".join(tail)))
    return p


def convert(a, hf_dir, outtype, out):
    p, dt = run([a.hf_python, os.path.join(HERE, "hf_llamacpp_shim.py"), a.converter, hf_dir,
                 "--outtype", outtype, "--outfile", out])
    return p, dt


def last_error_line(p):
    lines = [l for l in (p.stderr + p.stdout).splitlines() if l.strip()]
    errs = [l for l in lines if "Error" in l or "error" in l]
    return (errs or lines or ["(no output)"])[-1].strip()


def write_tokens(path, ids):
    T = len(ids)
    st.write(path, {"tokens": {"dtype": "I32", "shape": [1, T], "data_offsets": [0, 4 * T]}},
             struct.pack("<%di" % T, *ids))


def llamacpp_env(passive=False):
    """llama.cpp's environment: the caller's without OMP_WAIT_POLICY, so that its OpenMP
    workers wait as libgomp does by default (they spin), as a user's llama.cpp runs.
    passive=True (--also-passive, extra lines only) sets OMP_WAIT_POLICY=PASSIVE: on a
    machine shared with other processes a descheduled spinning worker can stall the graph,
    and the PASSIVE figures show how much. lrc runs with the caller's environment (it has
    no OpenMP)."""
    env = {k: v for k, v in common.ORIGINAL_ENV.items() if k != "OMP_WAIT_POLICY"}
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def llama_bench(a, gguf, passive=False):
    p, _ = run([os.path.join(a.llamacpp_build, "bin", "llama-bench"), "-m", gguf, "-p", str(a.pp), "-n", str(a.tg),
                "-t", str(a.threads), "-r", str(a.repeat), "-o", "json"], env=llamacpp_env(passive))
    must(p, "llama-bench %s" % os.path.basename(gguf))
    res, info = {}, {}
    for row in json.loads(p.stdout):
        kind = "pp" if row.get("n_gen", 0) == 0 else "tg"
        res[kind] = common.median(row.get("samples_ts") or [row["avg_ts"]])
        info = row
    return res, info


def lrc_pp(a, pkg, inp, out):
    p, _ = run([a.lrc, "forward", pkg, "--input", inp, "-o", out, "--threads", str(a.threads),
                "--repeat", str(a.repeat)])
    must(p, "lrc forward")
    m = re.search(r"forward:\s*median\s+([0-9.eE+-]+)\s*ms", p.stdout)
    if not m:
        raise RuntimeError("lrc forward printed no median: %s" % p.stdout.strip())
    return a.pp * 1000.0 / float(m.group(1))


def lrc_tg(a, dec):
    p, _ = run([a.lrc, "generate", dec, "--prompt-ids", "84", "-n", str(a.tg), "--temperature", "0",
                "--threads", str(a.threads)])
    must(p, "lrc generate")
    m = re.search(r"generate:\s*(\d+) new tokens in ([0-9.]+) ms,\s*([0-9.]+) tokens/s", p.stderr)
    if not m:
        raise RuntimeError("lrc generate printed no tokens/s: %s" % p.stderr.strip())
    return float(m.group(3))


def read_f32(path, rows, cols):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != 4 * rows * cols:
        raise RuntimeError("%s: %d bytes, expected %d x %d floats" % (path, len(data), rows, cols))
    return struct.unpack("<%df" % (rows * cols), data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lrc", default=os.path.join(common.REPO, "build", "lrc"))
    ap.add_argument("--llamacpp-build", required=True, help="llama.cpp's CMake build (bin/llama-bench, bin/libllama.so)")
    ap.add_argument("--converter", required=True, help="llama.cpp's convert_hf_to_gguf.py (its folder: include/, gguf-py/)")
    ap.add_argument("--hf-python", default=os.environ.get("LRC_HF_PYTHON"),
                    help="a Python with transformers for the converter (default $LRC_HF_PYTHON)")
    ap.add_argument("--preset", default="60m")
    ap.add_argument("--norm", default="layerrope")
    ap.add_argument("--vocab", type=int, default=256, help="the model's vocabulary (>= 256; default 256, bytes)")
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure per round (default 3)")
    ap.add_argument("--tokenizer", default="auto", choices=("auto", "exported", "byte-fallback"))
    ap.add_argument("--also-passive", action="store_true",
                    help="also time llama.cpp with OMP_WAIT_POLICY=PASSIVE, printed as extra lines (no ratio)")
    ap.add_argument("--keep", help="work in this directory (kept) instead of a temporary one")
    a = ap.parse_args()
    if not a.hf_python:
        ap.error("--hf-python PY (or LRC_HF_PYTHON): a Python with transformers for llama.cpp's converter")
    a.lrc = os.path.abspath(a.lrc)
    a.llamacpp_build = os.path.abspath(a.llamacpp_build)
    a.converter = os.path.abspath(a.converter)
    src = os.path.dirname(a.converter)
    sets = ["--preset", a.preset, "--set", "norm=%s" % a.norm, "--set", "vocab=%d" % a.vocab]
    cache = {}
    try:
        with open(os.path.join(a.llamacpp_build, "CMakeCache.txt")) as f:
            for l in f:
                m = re.match(r"(CMAKE_BUILD_TYPE|GGML_NATIVE|CMAKE_CXX_FLAGS|LLAMA_CURL|GGML_OPENMP|GGML_BLAS):[A-Z]+=(.*)", l)
                if m:
                    cache[m.group(1)] = m.group(2)
    except OSError:
        pass
    common.print_header("lrc export --hf in llama.cpp: pp%d / tg%d, f32, bf16 and q8 (Q8_0)" % (a.pp, a.tg), a.threads,
                        extra=[("model", "llama preset %s, norm=%s, vocab=%d (bytes%s), seed 0" % (
                                   a.preset, a.norm, a.vocab, " and unreachable ids" if a.vocab > 256 else "")),
                               ("load avg", "%s (start)" % common.loadavg()), ("lrc", a.lrc), ("llama.cpp", "%s (build %s)" % (src, a.llamacpp_build)),
                               ("llama.cpp OMP", "OMP_WAIT_POLICY unset (llama.cpp's default)%s%s" % (
                                   "; the caller's %s not passed on" % common.ORIGINAL_ENV["OMP_WAIT_POLICY"]
                                   if "OMP_WAIT_POLICY" in common.ORIGINAL_ENV else "",
                                   "; --also-passive: extra lines with PASSIVE" if a.also_passive else "")),
                               ("llama.cpp cmake", " ".join("%s=%s" % kv for kv in sorted(cache.items())) or "?")])
    tmp = a.keep or tempfile.mkdtemp(prefix="lrc-llamacpp-")
    if a.keep:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
    w, exp = os.path.join(tmp, "w.safetensors"), os.path.join(tmp, "hf")
    try:
        must(run([a.lrc, "init", "llama"] + sets + ["--seed", "0", "-o", w])[0], "lrc init")
        p, dt = run([a.lrc, "export", w, "llama"] + sets + ["--hf", exp])
        must(p, "lrc export")
        print("lrc export: %.1f s (%s)" % (dt, p.stdout.strip().splitlines()[-1]))

        # ---- conversion ------------------------------------------------------------------
        gg = {t: os.path.join(tmp, "model-%s.gguf" % t) for t in ("f32", "bf16", "q8_0")}
        hf_dir = exp
        if a.tokenizer in ("auto", "exported"):
            p, dt = convert(a, exp, "f32", gg["f32"])
            if p.returncode == 0:
                print("convert (tokenizer.json as exported) f32: OK, %.1f s" % dt)
            else:
                m = re.search(r"chkhsh:\s*([0-9a-f]{64})", p.stderr + p.stdout)
                print("convert (tokenizer.json as exported): REFUSED in %.1f s: %s%s" % (
                    dt, last_error_line(p), " (chkhsh %s)" % m.group(1) if m else ""))
                if a.tokenizer == "exported":
                    print("RESULT: llama.cpp's converter refuses lrc's tokenizer.json")
                    return 1
                hf_dir = None
        if hf_dir is None or a.tokenizer == "byte-fallback":
            hf_dir = exp + "-byte-fallback"
            print("EXPERIMENT: a copy of the export with tokenizer.json rewritten to Llama 2's byte-fallback shape")
            print("            (bench/hf_llamacpp.py: byte_fallback_tokenizer; weights and config.json untouched): %s"
                  % hf_dir)
            shutil.copytree(exp, hf_dir)
            with open(os.path.join(hf_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
                json.dump(byte_fallback_tokenizer(a.vocab), f, ensure_ascii=False, indent=1)
            with open(os.path.join(hf_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(BYTE_FALLBACK_TOKENIZER_CONFIG, f, indent=2)
            chk = subprocess.run([a.hf_python, "-c", (
                "import sys; from transformers import AutoTokenizer as A\n"
                "t = A.from_pretrained(sys.argv[1]); s = sys.argv[2]; ids = t.encode(s)\n"
                "print('transformers on the rewritten tokenizer.json: ids are the bytes: %s; decode round-trips: %s'"
                " % (ids == list(s.encode()), t.decode(ids) == s))"), hf_dir, PROMPT],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            print(chk.stdout.strip() or "transformers check failed: %s" % last_error_line(chk))
        for t in ("f32", "bf16", "q8_0"):
            if t == "f32" and hf_dir == exp:
                continue
            p, dt = convert(a, hf_dir, t, gg[t])
            must(p, "convert_hf_to_gguf.py --outtype %s" % t)
            print("convert %-5s %.1f s, %.1f MB" % (t, dt, os.path.getsize(gg[t]) / 1e6))

        # ---- logits ----------------------------------------------------------------------
        dumper = os.path.join(tmp, "hf_llamacpp_logits")
        bindir = os.path.join(a.llamacpp_build, "bin")
        must(run(["g++", "-O2", "-std=c++17", "-I", os.path.join(src, "include"), "-I", os.path.join(src, "ggml", "include"),
                  os.path.join(HERE, "hf_llamacpp_logits.cpp"), "-o", dumper, "-L", bindir, "-lllama", "-lggml",
                  "-lggml-base", "-Wl,-rpath," + bindir])[0], "g++ hf_llamacpp_logits.cpp")
        want = list(PROMPT.encode("utf-8"))
        inp, out = os.path.join(tmp, "prompt.st"), os.path.join(tmp, "prompt_logits.st")
        write_tokens(inp, want)
        must(run([a.lrc, "forward", "llama"] + sets + ["--weights", w, "--input", inp, "-o", out, "--target", "ref"])[0],
             "lrc forward --target ref")
        ref = st.arrays(out)["logits"][2]
        V = a.vocab
        print("prompt: %r (%d bytes)" % (PROMPT, len(want)))
        for t, kv, fa in (("f32", "f16", "auto"), ("f32", "f32", "auto"), ("f32", "f32", "off"), ("q8_0", "f16", "auto")):
            lf = os.path.join(tmp, "llamacpp_%s_%s_%s.f32" % (t, kv, fa))
            p, _ = run([dumper, gg[t], PROMPT, lf, str(a.threads), kv, fa], env=llamacpp_env())
            try:
                must(p, "hf_llamacpp_logits %s" % t)
            except RuntimeError as e:  # a precision llama.cpp cannot run here: said, and the rest goes on
                print("logits llama.cpp %-5s: CANNOT RUN HERE: %s" % (t, e))
                continue
            ids = [int(x) for x in re.search(r"ids:(.*)", p.stdout).group(1).split()]
            same = ids == want
            if not same or t == "q8_0" or kv == "f16":
                print("llama.cpp %-5s tokenizer: %d ids, %s" % (t, len(ids), "the prompt's bytes" if same else
                                                              "NOT the bytes: %s" % ids[:20]))
            if not same:
                continue
            got = read_f32(lf, len(ids), V)
            diff = max(abs(x - y) for x, y in zip(got, ref))
            top = max(abs(y) for y in ref)
            am = sum(1 for i in range(len(ids)) if max(range(V), key=lambda j: got[i * V + j]) ==
                     max(range(V), key=lambda j: ref[i * V + j]))
            print("logits llama.cpp %-5s (KV cache %s, flash attention %-4s) vs lrc (ref target, LayerRoPE unfolded): "
                  "max |diff| = %.3g (max |logit| %.3g), argmax agrees at %d/%d positions" % (
                      t, kv, fa, diff, top, am, len(ids)))

        # ---- speed -----------------------------------------------------------------------
        pairs = (("f32", "f32"), ("bf16", "bf16"), ("q8", "q8_0"))  # lrc --weights-dtype, llama.cpp GGUF type
        pkg, dec = {}, {}
        for wd, _ in pairs:
            pkg[wd], dec[wd] = os.path.join(tmp, "pkg%d_%s" % (a.pp, wd)), os.path.join(tmp, "dec%d_%s" % (a.tg + 1, wd))
            p, dt = run([a.lrc, "compile", "llama"] + sets + ["--weights", w, "--target", "cpu", "--weights-dtype", wd,
                                                               "--seq", str(a.pp), "--logits", "last", "-o", pkg[wd]])
            must(p, "lrc compile --seq --logits last --weights-dtype %s" % wd)
            print("lrc compile --seq %d --logits last --weights-dtype %s: %.1f s" % (a.pp, wd, dt))
            p, dt = run([a.lrc, "compile", "llama"] + sets + ["--weights", w, "--target", "cpu", "--weights-dtype", wd,
                                                               "--ctx", str(a.tg + 1), "-o", dec[wd]])
            must(p, "lrc compile --ctx --weights-dtype %s" % wd)
            meta = json.load(open(os.path.join(dec[wd], "package.json")))["meta"]
            print("lrc package for cpu %s, requires %s" % (meta.get("cpu"), meta.get("requires")))
            print("lrc compile --ctx %d --weights-dtype %s: %.1f s, weights %.1f MB (%.3f of f32's)" % (
                a.tg + 1, wd, dt, os.path.getsize(os.path.join(dec[wd], "weights.safetensors")) / 1e6,
                os.path.getsize(os.path.join(dec[wd], "weights.safetensors")) / os.path.getsize(os.path.join(dec["f32"], "weights.safetensors"))))
        bench_in, bench_out = os.path.join(tmp, "pp.st"), os.path.join(tmp, "pp_logits.st")
        write_tokens(bench_in, [(7 * i + 3) % 256 for i in range(a.pp)])
        got = {}
        for wd, gt in pairs:
            for k in ("pp", "tg"):
                got["llama.cpp %s %s" % (gt, k)], got["lrc %s %s" % (wd, k)] = [], []
        extra = {}  # --also-passive: llama.cpp with OMP_WAIT_POLICY=PASSIVE, kept apart from got
        info, broken = {}, {}
        for r in range(a.rounds):
            for wd, gt in pairs:
                if gt not in broken:
                    try:
                        res, info = llama_bench(a, gg[gt])
                        got["llama.cpp %s pp" % gt].append(res["pp"])
                        got["llama.cpp %s tg" % gt].append(res["tg"])
                    except RuntimeError as e:  # reported below, not dropped
                        broken[gt] = str(e)
                if a.also_passive and gt not in broken:
                    try:
                        res, _ = llama_bench(a, gg[gt], passive=True)
                        for k in ("pp", "tg"):
                            extra.setdefault("llama.cpp %s %s" % (gt, k), []).append(res[k])
                    except RuntimeError as e:  # the extra lines only; the comparison goes on
                        print("extra, not llama.cpp's default: llama.cpp %s with OMP_WAIT_POLICY=PASSIVE failed: %s"
                              % (gt, e))
                got["lrc %s pp" % wd].append(lrc_pp(a, pkg[wd], bench_in, bench_out))
                got["lrc %s tg" % wd].append(lrc_tg(a, dec[wd]))
        print("llama-bench: build %s (%s), cpu_info %s, backends %s, n_batch %s, n_ubatch %s, flash_attn %s, type_k %s" % (
            info.get("build_commit"), info.get("build_number"), info.get("cpu_info"), info.get("backends"),
            info.get("n_batch"), info.get("n_ubatch"), info.get("flash_attn"), info.get("type_k")))
        med = {k: common.median(v) for k, v in got.items() if v}
        print("tokens/s, %d threads, median of %d rounds (each the median of %d runs; lrc tg: one run of %d tokens):"
              % (a.threads, a.rounds, a.repeat, a.tg))
        for k, v in got.items():
            if v:
                print("  %-18s %9.1f   (rounds: %s)" % (k, med[k], ", ".join("%.1f" % x for x in v)))
        for gt, why in broken.items():
            print("  llama.cpp %-8s CANNOT RUN HERE: %s" % (gt, why))
        for wd, gt in pairs:
            if gt in broken:
                print("ratio lrc %s / llama.cpp %s: none (llama.cpp cannot run %s here)" % (wd, gt, gt))
                continue
            print("ratio lrc %s / llama.cpp %s: pp%d %.3f, tg%d %.3f" % (
                wd, gt, a.pp, med["lrc %s pp" % wd] / med["llama.cpp %s pp" % gt], a.tg,
                med["lrc %s tg" % wd] / med["llama.cpp %s tg" % gt]))
        for k, v in extra.items():
            print("extra, not llama.cpp's default: %s with OMP_WAIT_POLICY=PASSIVE %9.1f tokens/s   (rounds: %s)"
                  % (k, common.median(v), ", ".join("%.1f" % x for x in v)))
    except RuntimeError as e:
        print("RESULT: %s" % e)
        return 1
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return common.finish(None, None, False, [], "")


if __name__ == "__main__":
    common.run_timed_main(main)
