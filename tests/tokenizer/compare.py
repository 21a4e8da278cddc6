#!/usr/bin/env python3
"""compare.py — lrc tokenize's output against what the `tokenizers` library
wrote (tests/fixtures/tokenizers, made by tests/reference/make_tokenizer_fixtures.py).

  compare.py ids EXPECTED LRC_OUT         EXPECTED: "F id id ..." a line; LRC_OUT: "id id ..." a line
  compare.py crc EXPECTED LRC_OUT         EXPECTED: "count crc32 F" a line (the ids joined by spaces)
  compare.py roundtrip EXPECTED TEXT DEC  where F is 1 (the library's decode(encode(s)) == s), the
                                          decoded line DEC equals the line of TEXT

Prints the first difference with its line number, exits 1 on any; the standard library only."""
import sys
import zlib


def lines(path):
    data = open(path, "rb").read()
    out = data.split(b"\n")
    if out and out[-1] == b"":
        out.pop()
    return out


def main():
    mode, expected = sys.argv[1], lines(sys.argv[2])
    if mode == "roundtrip":
        text, dec = lines(sys.argv[3]), lines(sys.argv[4])
        if len(text) != len(expected) or len(dec) != len(expected):
            sys.exit(f"roundtrip: {len(text)} text lines, {len(dec)} decoded, {len(expected)} expected")
        n, field = 0, 2 if sys.argv[2].endswith(".crc") else 0
        for i, (e, t, d) in enumerate(zip(expected, text, dec), 1):
            if e.split(b" ")[field] != b"1":
                continue
            n += 1
            if t != d:
                sys.exit(f"line {i}: decode(encode(s)) != s: {d[:80]!r} for {t[:80]!r}")
        print(f"roundtrip: {n} of {len(expected)} lines equal (the others the library's own decode changes)")
        return
    got = lines(sys.argv[3])
    if len(got) != len(expected):
        sys.exit(f"{mode}: lrc wrote {len(got)} lines, the library {len(expected)}")
    for i, (e, g) in enumerate(zip(expected, got), 1):
        if mode == "ids":
            want = b" ".join(e.split(b" ")[1:])
            if g.strip() != want.strip():
                sys.exit(f"line {i}: lrc {g[:200].decode()} | library {want[:200].decode()}")
        else:
            count, crc, _ = e.split(b" ")
            ids = g.strip()
            n = len(ids.split()) if ids else 0
            if n != int(count) or format(zlib.crc32(ids), "08x") != crc.decode():
                sys.exit(f"line {i}: lrc's {n} ids ({format(zlib.crc32(ids), '08x')}) differ from the library's {count.decode()} ({crc.decode()}): {ids[:200].decode()}")
    print(f"{mode}: {len(expected)} lines equal")


main()
