"""The float32 tensors of a safetensors file, for the integration tests."""
import json
import struct

import numpy as np


def load_flat(path):
    """Every tensor of `path` (float32), in name order, as one flat array."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return np.concatenate([
        np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]],
                      dtype=np.float32)
        for _, v in sorted(header.items())])
