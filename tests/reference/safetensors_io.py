"""Minimal safetensors reader/writer (no dependency on the `safetensors` package).

File layout (https://github.com/huggingface/safetensors):
  * 8 bytes: little-endian u64 N, the length of the JSON header;
  * N bytes: UTF-8 JSON object {name: {"dtype", "shape", "data_offsets": [begin, end]}},
    plus an optional "__metadata__": {str: str}; we pad it with spaces so that the data
    section starts at a multiple of 8 (lets readers mmap and use aligned loads);
  * the raw little-endian tensor data, offsets relative to the start of this section.
Tensors are written contiguously, in the order given, with no gaps.
"""

import json
import struct

import numpy as np
import torch

# safetensors dtype tag -> (little-endian numpy dtype, torch dtype)
_DTYPES = {
    "F64": (np.dtype("<f8"), torch.float64),
    "F32": (np.dtype("<f4"), torch.float32),
    "I64": (np.dtype("<i8"), torch.int64),
    "I32": (np.dtype("<i4"), torch.int32),
}
_TORCH_TO_TAG = {tdt: tag for tag, (_, tdt) in _DTYPES.items()}


def save(path, tensors, metadata=None):
    """Write `tensors` (an ordered dict name -> torch.Tensor) to `path`.

    The dtype of each tensor is kept as is (F32/F64/I32/I64); callers convert first.
    `metadata` is an optional dict of str -> str stored under "__metadata__".
    """
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("safetensors metadata must map str to str: %r=%r" % (k, v))
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name, t in tensors.items():
        if name == "__metadata__":
            raise ValueError("reserved tensor name")
        tag = _TORCH_TO_TAG.get(t.dtype)
        if tag is None:
            raise TypeError("unsupported dtype %s for %s" % (t.dtype, name))
        npdt = _DTYPES[tag][0]
        raw = t.detach().cpu().contiguous().numpy().astype(npdt, copy=False).tobytes()
        header[name] = {"dtype": tag, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for raw in blobs:
            f.write(raw)


def load(path):
    """Read a safetensors file; returns (dict name -> torch.Tensor, metadata dict).

    Checks what a strict reader should: header bounds, known dtypes, byte counts that
    match the shapes, and tensors that tile the data section exactly.
    """
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ValueError("%s: truncated" % path)
    (n,) = struct.unpack("<Q", buf[:8])
    if 8 + n > len(buf):
        raise ValueError("%s: header runs past end of file" % path)
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    data = buf[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    spans = []
    for name, info in header.items():
        npdt, _ = _DTYPES[info["dtype"]]
        shape = [int(s) for s in info["shape"]]
        begin, end = info["data_offsets"]
        count = 1
        for s in shape:
            count *= s
        if not (0 <= begin <= end <= len(data)) or end - begin != count * npdt.itemsize:
            raise ValueError("%s: bad data_offsets for %s" % (path, name))
        arr = np.frombuffer(data[begin:end], dtype=npdt).reshape(shape)
        tensors[name] = torch.from_numpy(arr.astype(npdt.newbyteorder("="), copy=True))
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for begin, end in spans:
        if begin != pos:
            raise ValueError("%s: gap or overlap in data section" % path)
        pos = end
    if pos != len(data):
        raise ValueError("%s: trailing bytes after tensor data" % path)
    return tensors, metadata
