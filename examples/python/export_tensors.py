#!/usr/bin/env python3
"""Converts Fashion-MNIST's IDX files (gzipped or not, as Debian's
dataset-fashion-mnist ships them) into .npy files for fedcaf's tensors
dataset (data_configs.dataset_name: tensors):

    train_features.npy  uint8 [60000, 1, 28, 28]   (fedcaf scales uint8 to [0, 1])
    train_labels.npy    int64 [60000]
    test_features.npy   uint8 [10000, 1, 28, 28]
    test_labels.npy     int64 [10000]

    python3 examples/python/export_tensors.py -o build/examples/fashion_mnist

Needs NumPy only.
"""

import argparse
import gzip
import os
import struct

import numpy as np


def read_idx(path: str) -> np.ndarray:
    """Reads an IDX file of unsigned bytes (path, or path + '.gz')."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    if not os.path.exists(path):
        raise SystemExit(f"export_tensors.py: {path}[.gz] not found "
                         "(install dataset-fashion-mnist, or name another "
                         "folder with -d)")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, kind, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        raise SystemExit(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return body.reshape(dims)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-d", "--dataset-dir",
                        default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("-o", "--output-dir", default="fashion_mnist")
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = read_idx(os.path.join(args.dataset_dir,
                                       f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(os.path.join(args.dataset_dir,
                                       f"{prefix}-labels-idx1-ubyte"))
        features = images.reshape(images.shape[0], 1, *images.shape[1:])
        np.save(os.path.join(args.output_dir, f"{split}_features.npy"),
                features)
        np.save(os.path.join(args.output_dir, f"{split}_labels.npy"),
                labels.astype(np.int64))
    print(f"wrote {args.output_dir}/{{train,test}}_{{features,labels}}.npy")


if __name__ == "__main__":
    main()
