#!/usr/bin/env python3
# st.py — writes good and bad safetensors files for the command-line tests
# (standard library only): st.py make OUT '{"name": [dtype, shape, [values]]}',
# and drop, set, hdr, raw, hlen, cut to damage one; bf16, widen and dtypes
# to change or count dtypes (see each command). Imported (sys.path + import
# st), its read, tensors and arrays serve the tests' own Python.
import array, json, struct, sys

SIZE = {"F32": 4, "I32": 4, "F16": 2, "BF16": 2, "F64": 8, "I8": 1}

def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]

def write(p, header, data):
    s = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    s += b" " * (-len(s) % 8)
    open(p, "wb").write(struct.pack("<Q", len(s)) + s + data)

def tensors(p):  # name -> [dtype, shape, bytes]
    h, d = read(p)
    h.pop("__metadata__", None)
    return {k: [v["dtype"], v["shape"], d[v["data_offsets"][0]:v["data_offsets"][1]]] for k, v in h.items()}

def pack(p, ts):
    h, data, off = {}, b"", 0
    for k, (dt, shape, raw) in ts.items():
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    write(p, h, data)

def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n

def arrays(p):  # name -> (dtype, shape, array.array) of every F32 and I32 tensor, for the tests' Python
    h, d = read(p)
    h.pop("__metadata__", None)
    out = {}
    for k, v in h.items():
        if v["dtype"] in ("F32", "I32"):
            a = array.array("f" if v["dtype"] == "F32" else "i")
            a.frombytes(d[v["data_offsets"][0]:v["data_offsets"][1]])
            out[k] = (v["dtype"], v["shape"], a)
    return out

if __name__ == "__main__":  # a command; imported, st.py is its functions
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "drop":            # IN OUT NAME
        ts = tensors(a[0]); del ts[a[2]]; pack(a[1], ts)
    elif cmd == "set":           # IN OUT NAME DTYPE SHAPE: bytes kept, cut or zero-padded
        ts = tensors(a[0]); shape = json.loads(a[4]); n = numel(shape) * SIZE[a[3]]
        raw = ts.get(a[2], [0, 0, b""])[2][:n]
        ts[a[2]] = [a[3], shape, raw + bytes(n - len(raw))]; pack(a[1], ts)
    elif cmd == "make":          # OUT SPEC: {"name": [dtype, shape, [values]]}
        ts = {}
        for k, (dt, shape, vals) in json.loads(a[1]).items():
            ts[k] = [dt, shape, struct.pack("<%d%s" % (len(vals), "f" if dt == "F32" else "i"), *vals)]
        pack(a[0], ts)
    elif cmd == "hdr":           # IN OUT STATEMENT: edits the header dict h, the data stay
        h, d = read(a[0]); exec(a[2]); write(a[1], h, d)
    elif cmd == "raw":           # IN OUT TEXT: replaces the header by TEXT, the data stay
        h, d = read(a[0]); write(a[1], a[2].encode(), d)
    elif cmd == "hlen":          # IN OUT N: overwrites the 8-byte header length
        b = open(a[0], "rb").read(); open(a[1], "wb").write(struct.pack("<Q", int(a[2])) + b[8:])
    elif cmd == "cut":           # IN OUT WHERE: truncates in the middle of the header or the data
        b = open(a[0], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
        at = 8 + n // 2 if a[2] == "header" else 8 + n + (len(b) - 8 - n) // 2
        open(a[1], "wb").write(b[:at])
    elif cmd == "bf16":          # IN OUT: every F32 tensor rounded to BF16 (to nearest even)
        ts = tensors(a[0])
        for k, (dt, shape, raw) in ts.items():
            if dt == "F32":
                u = struct.unpack("<%dI" % numel(shape), raw)
                ts[k] = ["BF16", shape, struct.pack("<%dH" % len(u), *(((x + 0x7fff + ((x >> 16) & 1)) >> 16) & 0xffff for x in u))]
        pack(a[1], ts)
    elif cmd == "widen":         # IN OUT: every BF16 tensor as F32 (exact)
        ts = tensors(a[0])
        for k, (dt, shape, raw) in ts.items():
            if dt == "BF16":
                h = struct.unpack("<%dH" % numel(shape), raw)
                ts[k] = ["F32", shape, struct.pack("<%dI" % len(h), *(x << 16 for x in h))]
        pack(a[1], ts)
    elif cmd == "dtypes":        # IN: how many tensors of each dtype, as "BF16 12 F32 3"
        n = {}
        for dt, _, _ in tensors(a[0]).values():
            n[dt] = n.get(dt, 0) + 1
        print(" ".join("%s %d" % kv for kv in sorted(n.items())))
    else:
        sys.exit("st.py: unknown command " + cmd)
