#!/usr/bin/env python3
"""tokenizer_speed.py — encoding throughput of lrc's tokenizer.json (runtime/tokenizer.c)
against Hugging Face `tokenizers` (its Rust core, one thread) on the same
machine, in one run: the King James Bible as one text, for a byte-level BPE
(the Llama 3 / Qwen2 form) and a SentencePiece-style BPE with byte fallback.
Both sides encode the same text with the same tokenizer.json, in two ways:
the whole text as one string (encode), and each verse on its own (the
library's encode_batch on one thread; lrc tokenize --lines); the ids are
checked equal before any time counts.

  "$LRC_HF_PYTHON" bench/tokenizer_speed.py [--lrc build/lrc] [--repeat 5]
      [--tokenizers tests/fixtures/tokenizers/bytelevel_16k,tests/fixtures/tokenizers/sp_16k]

Prints MB/s for each side (median of --repeat) and the ratio lrc / tokenizers."""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before the library loads: one thread
os.environ["TOKENIZERS_PARALLELISM"] = "false"
import tokenizers  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--lrc", default=os.path.join(root, "build", "lrc"))
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--tokenizers", default=",".join(os.path.join(root, "tests", "fixtures", "tokenizers", n)
                                                 for n in ("bytelevel_16k", "sp_16k")))
args = ap.parse_args()

text = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, check=True).stdout
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
print(f"cpu: {cpu}; tokenizers {tokenizers.__version__} (one thread); text: the King James Bible, {len(text)} bytes")
print(f"{'tokenizer':<16}{'mode':<8}{'tokens':>10}{'tokenizers MB/s':>18}{'lrc MB/s':>12}{'lrc / tokenizers':>19}")
lines = text.decode("utf-8").split("\n")
if lines[-1] == "":
    lines.pop()
for d in args.tokenizers.split(","):
    path = os.path.join(d, "tokenizer.json")
    tok = tokenizers.Tokenizer.from_file(path)
    for mode in ("text", "lines"):
        if mode == "text":
            run = lambda: [tok.encode(text.decode("utf-8")).ids]
        else:
            run = lambda: [e.ids for e in tok.encode_batch(lines)]
        ref = [i for ids in run() for i in ids]
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        hf = len(text) / statistics.median(times) / 1e6
        cmd = [args.lrc, "tokenize", path, "--repeat", str(args.repeat)] + (["--lines"] if mode == "lines" else [])
        r = subprocess.run(cmd, input=text, capture_output=True)
        if r.returncode:
            sys.exit(f"lrc tokenize failed: {r.stderr.decode()}")
        ids = [int(x) for x in r.stdout.split()]
        if ids != ref:
            first = next(i for i, (a, b) in enumerate(zip(ids + [-1], ref + [-1])) if a != b)
            sys.exit(f"{os.path.basename(d)} ({mode}): lrc's ids differ from the library's at token {first}")
        mbs = float(r.stderr.decode().strip().rsplit(":", 1)[1].split()[0])
        print(f"{os.path.basename(d):<16}{mode:<8}{len(ids):>10}{hf:>18.2f}{mbs:>12.2f}{mbs / hf:>19.2f}")
