#!/usr/bin/env python3
"""make_tokenizer_fixtures.py — the reference tokenizers and ids for lrc's
tokenizer.json implementation (tests/tokenizer/fixtures.sh), written by Hugging
Face's `tokenizers` library, so that CI compares against them with no Python
library. Run with the virtual environment of the Hugging Face fixtures:

  "$LRC_HF_PYTHON" tests/reference/make_tokenizer_fixtures.py

Trains BPE tokenizers with the library's own BpeTrainer on the King James Bible
(Debian's bible-kjv), in the forms the common checkpoints use, and writes for
each NAME under tests/fixtures/tokenizers/:
  NAME/tokenizer.json   the library's file
  NAME/edge.ids         a line per line of edge.txt: "F id id ...", F = 1 where
                        the library's decode(encode(s)) == s
  NAME/edge_whole.ids   the same for edge.txt as one text
  NAME/kjv.crc          a line per Bible verse: "count crc32 F", the CRC-32 of the
                        ids joined by single spaces (the ids themselves would be
                        megabytes)
Deterministic: the same library version writes the same files."""
import os
import subprocess
import zlib

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = os.path.join(root, "fixtures", "tokenizers")
kjv = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, check=True).stdout.decode("utf-8")
kjv_lines = kjv.split("\n")
if kjv_lines[-1] == "":
    kjv_lines.pop()
edge_bytes = open(os.path.join(out, "edge.txt"), "rb").read()
edge = edge_bytes.decode("utf-8")
edge_lines = edge.split("\n")
if edge_lines[-1] == "":
    edge_lines.pop()

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")


def bytelevel_gpt2(vocab):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=vocab, show_progress=False, special_tokens=["<|endoftext|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(kjv_lines, tr)
    return tok


QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
         r"|\s+(?!\S)|\s+")


def bytelevel_qwen2(vocab):
    """Qwen2's form: NFC, its split regex (one digit a piece), ByteLevel."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=vocab, show_progress=False, special_tokens=["<|endoftext|>", "<|im_start|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(kjv_lines, tr)
    return tok


def sentencepiece_nfkc(vocab):
    """tokenizers' own SentencePieceBPETokenizer form: NFKC, then Metaspace."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tr = trainers.BpeTrainer(vocab_size=vocab, show_progress=False, special_tokens=["<unk>"])
    tok.train_from_iterator(kjv_lines, tr)
    return tok


def bytelevel_llama3(vocab):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab, show_progress=False, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(kjv_lines, tr)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def sentencepiece_bpe(vocab, llama2_form):
    """Llama 2's layout: <unk> <s> </s>, the 256 <0xXX> byte tokens, then the
    trained pieces; only <unk> <s> </s> are added (special) tokens."""
    norm = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    meta = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    train = Tokenizer(models.BPE())
    if llama2_form:
        train.normalizer = norm
    else:
        train.pre_tokenizer = meta
    tr = trainers.BpeTrainer(vocab_size=vocab - 259, show_progress=False, special_tokens=[])
    train.train_from_iterator(kjv_lines, tr)
    m = train.get_vocab()
    trained = sorted(m, key=m.get)
    v = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        v[f"<0x{b:02X}>"] = 3 + b
    for t in trained:
        if t not in v:
            v[t] = len(v)
    import json
    merges = json.loads(train.to_str())["model"]["merges"]
    merges = [tuple(x.split(" ")) if isinstance(x, str) else tuple(x) for x in merges]
    tok = Tokenizer(models.BPE(vocab=v, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True) for t in ("<unk>", "<s>", "</s>")])
    if llama2_form:
        tok.normalizer = norm
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(content=" ", left=1, right=0)])
    else:
        tok.pre_tokenizer = meta
        tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True),
                                         decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    return tok


def flag(tok, ids, s):
    return 1 if tok.decode(ids) == s else 0


def write(name, tok, with_kjv):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    tok.save(path)
    tok = Tokenizer.from_file(path)  # what the file says, not the object in memory
    with open(os.path.join(d, "edge.ids"), "w") as f:
        for s in edge_lines:
            ids = tok.encode(s).ids
            f.write(" ".join([str(flag(tok, ids, s))] + [str(i) for i in ids]) + "\n")
    ids = tok.encode(edge).ids
    with open(os.path.join(d, "edge_whole.ids"), "w") as f:
        f.write(" ".join([str(flag(tok, ids, edge))] + [str(i) for i in ids]) + "\n")
    if with_kjv:
        enc = tok.encode_batch(kjv_lines)
        with open(os.path.join(d, "kjv.crc"), "w") as f:
            for s, e in zip(kjv_lines, enc):
                j = " ".join(map(str, e.ids)).encode()
                f.write(f"{len(e.ids)} {zlib.crc32(j):08x} {flag(tok, e.ids, s)}\n")
    print(f"{name}: {tok.get_vocab_size()} tokens")


print(f"tokenizers {tokenizers.__version__}")
write("bytelevel_1k", bytelevel_gpt2(1000), True)
write("bytelevel_4k", bytelevel_gpt2(4000), False)
write("bytelevel_16k", bytelevel_llama3(16000), True)
write("sp_1k", sentencepiece_bpe(1000, True), True)
write("sp_16k", sentencepiece_bpe(16000, False), True)
write("bytelevel_nfc_1k", bytelevel_qwen2(1000), True)
write("sp_nfkc_1k", sentencepiece_nfkc(1000), False)
