#!/usr/bin/env python3
"""tokenizer_diff.py — lrc's tokenizer.json against Hugging Face `tokenizers`
on random text, run by hand (it needs the library):

  "$LRC_HF_PYTHON" tests/reference/tokenizer_diff.py [LRC]

Every fixture tokenizer and variants of them written here (added tokens with
lstrip/rstrip, ByteLevel's add_prefix_space, ignore_merges, each Split
behavior with and without invert, Metaspace's prepend schemes with and
without split, unk with and without fuse_unk and no byte fallback, an EOS in
the template, Strip of two): 3000 seeded random strings of words, spaces,
tabs, \r, digits, CJK, emoji, combining marks, RTL text and the special tokens,
encoded by both; the library's ids decoded by both, special tokens kept and
skipped; 500 random id sequences decoded by both. Prints the mismatches of
each and their total (0 when lrc agrees)."""
import json, os, random, subprocess, sys, tempfile
from tokenizers import Tokenizer
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FX = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
LRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "lrc")
TMP = tempfile.mkdtemp()
rng = random.Random(7)
pieces = ["the", "The", "LORD", " ", "  ", "\t", "\r", "'s", "'LL", "don't", "123", "4567", "3.14", ",", ".", "!?", "...",
          "中文", "日本語", "한국어", "👨‍👩‍👧", "👍🏽", "🇯🇵", "e\u0301", "\u0301", "שלום", "مرحبا", "\u00a0", "\u3000", "ﬁ", "Ａ",
          "<s>", "</s>", "<unk>", "<|endoftext|>", "<|begin_of_text|>", "<0x41>", "▁", "a", "b", "x" * 40, "Ge1:1", "\u200d", "\u2009"]
def sample():
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
samples = [sample() for _ in range(3000)]
def variants():
    for name in sorted(os.listdir(FX)):
        p = os.path.join(FX, name, "tokenizer.json")
        if os.path.exists(p):
            yield name, json.load(open(p, encoding="utf-8"))
    j = json.load(open(os.path.join(FX, "sp_1k", "tokenizer.json"), encoding="utf-8"))
    for a in j["added_tokens"]:
        a["lstrip"] = a["rstrip"] = True
    yield "sp_1k_strip", j
    j = json.load(open(os.path.join(FX, "bytelevel_1k", "tokenizer.json"), encoding="utf-8"))
    j["pre_tokenizer"]["add_prefix_space"] = True
    yield "bl_prefix", j
    j = json.load(open(os.path.join(FX, "bytelevel_1k", "tokenizer.json"), encoding="utf-8"))
    j["model"]["ignore_merges"] = True
    yield "bl_ignore", j
    for beh in ["Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        for inv in [False, True]:
            j = json.load(open(os.path.join(FX, "bytelevel_16k", "tokenizer.json"), encoding="utf-8"))
            j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = beh
            j["pre_tokenizer"]["pretokenizers"][0]["invert"] = inv
            yield f"split_{beh}_{inv}", j
    for scheme in ["always", "never"]:
        for split in [True, False]:
            j = json.load(open(os.path.join(FX, "sp_16k", "tokenizer.json"), encoding="utf-8"))
            j["pre_tokenizer"]["prepend_scheme"] = scheme
            j["pre_tokenizer"]["split"] = split
            yield f"meta_{scheme}_{split}", j
    j = json.load(open(os.path.join(FX, "sp_1k", "tokenizer.json"), encoding="utf-8"))
    j["model"]["byte_fallback"] = False
    j["model"]["fuse_unk"] = False
    yield "sp_unk_nofuse", j
    j = json.load(open(os.path.join(FX, "sp_1k", "tokenizer.json"), encoding="utf-8"))
    j["model"]["byte_fallback"] = False
    yield "sp_unk_fuse", j
    j = json.load(open(os.path.join(FX, "sp_1k", "tokenizer.json"), encoding="utf-8"))
    j["post_processor"]["single"].append({"SpecialToken": {"id": "</s>", "type_id": 0}})
    j["post_processor"]["special_tokens"]["</s>"] = {"id": "</s>", "ids": [2], "tokens": ["</s>"]}
    j["decoder"]["decoders"][3]["start"] = 2
    j["decoder"]["decoders"][3]["stop"] = 0
    yield "sp_eos_strip2", j
bad = 0
for name, j in variants():
    path = os.path.join(TMP, name + ".json")
    json.dump(j, open(path, "w", encoding="utf-8"), ensure_ascii=False)
    try:
        tok = Tokenizer.from_file(path)
    except Exception as e:
        print(name, "library refuses:", e); continue
    inp = "\n".join(samples) + "\n"
    r = subprocess.run([LRC, "tokenize", path, "--lines"], input=inp.encode(), capture_output=True)
    if r.returncode:
        print(name, "lrc refuses:", r.stderr.decode().strip()); continue
    got = r.stdout.decode().split("\n")[:-1]
    ref = [tok.encode(s).ids for s in samples]
    mism = [(s, g, e) for s, g, e in zip(samples, got, ref) if g != " ".join(map(str, e))]
    # decode both ways
    idsin = "\n".join(" ".join(map(str, e)) for e in ref) + "\n"
    dmis = 0
    for flag, skip in [([], False), (["--no-special"], True)]:
        r2 = subprocess.run([LRC, "tokenize", path, "--lines", "--decode"] + flag, input=idsin.encode(), capture_output=True)
        dec = r2.stdout.split(b"\n")[:-1]
        for e, d in zip(ref, dec):
            if tok.decode(e, skip_special_tokens=skip).encode() != d:
                dmis += 1
                if dmis <= 2: print(name, "decode", skip, repr(tok.decode(e, skip_special_tokens=skip)), repr(d.decode(errors="replace")))
    # random ids
    V = tok.get_vocab_size()
    rids = [[rng.randrange(V) for _ in range(rng.randint(1, 8))] for _ in range(800)]
    rids = [x for x in rids if "\n" not in tok.decode(x, skip_special_tokens=False)][:500]  # the output is one line per id line
    r3 = subprocess.run([LRC, "tokenize", path, "--lines", "--decode"], input=("\n".join(" ".join(map(str, x)) for x in rids) + "\n").encode(), capture_output=True)
    dec = r3.stdout.split(b"\n")[:-1]
    rm = [(x, d) for x, d in zip(rids, dec) if tok.decode(x, skip_special_tokens=False).encode() != d]
    rmis = len(rm)
    for x, d in rm[:2]:
        print("   ids", x, [tok.id_to_token(i) for i in x], "lib", repr(tok.decode(x, skip_special_tokens=False)), "lrc", repr(d.decode(errors="replace")))
    print(f"{name}: encode mismatches {len(mism)}/{len(samples)}, decode mismatches {dmis}, random-id decode mismatches {rmis}/500")
    for s, g, e in mism[:2]:
        print("   ", repr(s), "lrc", g[:120], "lib", " ".join(map(str, e))[:120])
    bad += len(mism) + dmis + rmis
print("total mismatches", bad)
sys.exit(1 if bad else 0)
