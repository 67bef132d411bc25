"""Minimal safetensors writer/reader (the format: 8-byte little-endian header length, a JSON
header {name: {dtype, shape, data_offsets}}, then the raw little-endian tensor bytes)."""
import json
import struct

import numpy as np
import torch

_DTYPES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float8_e4m3fn if hasattr(torch, "float8_e4m3fn") else None: "F8_E4M3"}


def _raw_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def save(tensors, path, metadata=None):
    """tensors: {name: torch tensor (bf16 or f32)}, written in sorted name order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        raw = _raw_bytes(t)
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # align the data to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


def load(path):
    """{name: torch tensor} (BF16 and F32 only)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        if h["dtype"] == "BF16":
            arr = np.frombuffer(data[a:b], dtype=np.int16).reshape(h["shape"])
            out[name] = torch.from_numpy(arr.copy()).view(torch.bfloat16)
        elif h["dtype"] == "F32":
            out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=np.float32).reshape(h["shape"]).copy())
        else:
            raise ValueError(f"{path}: {name}: dtype {h['dtype']} not supported by this reader")
    return out
