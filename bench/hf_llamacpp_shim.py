#!/usr/bin/env python3
"""Run llama.cpp's convert_hf_to_gguf.py, unmodified, under an older torch.

    python bench/hf_llamacpp_shim.py CONVERTER.py [converter arguments...]

The converter (and the gguf-py it vendors) names dtypes that torch 1.13 lacks
(torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16/32/64, ...) in module-level
tables, so importing it fails before any conversion starts. This shim sets each missing
name on the torch module to a placeholder dtype (torch.uint8: never the dtype of an lrc
export, which is F32 only, so no tensor is ever read through a placeholder), puts the
converter's folder and its gguf-py on sys.path, and runs the converter with runpy as
__main__.
"""

import os
import runpy
import sys

import torch

MISSING_DTYPES = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                  "float8_e8m0fnu", "float4_e2m1fn_x2", "uint16", "uint32", "uint64")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: hf_llamacpp_shim.py CONVERTER.py [arguments...]")
    conv = os.path.abspath(sys.argv[1])
    shimmed = [n for n in MISSING_DTYPES if not hasattr(torch, n)]
    for n in shimmed:
        setattr(torch, n, torch.uint8)
    if shimmed:
        print("hf_llamacpp_shim: torch %s lacks %s (placeholders: torch.uint8)" % (torch.__version__, ", ".join(shimmed)),
              file=sys.stderr)
    here = os.path.dirname(conv)
    sys.path[:0] = [here, os.path.join(here, "gguf-py")]
    sys.argv = [conv] + sys.argv[2:]
    runpy.run_path(conv, run_name="__main__")


if __name__ == "__main__":
    main()
