#!/usr/bin/env python3
"""Writes a TorchScript model for fedcaf's C++ trainer (model_configs.name:
torchscript): the same small CNN for 28 x 28 Fashion-MNIST images as
fedcaf's built-in one (same tensor names and shapes), scripted with
torch.jit.script and saved with .save(path).

    python3 examples/python/export_torchscript.py -o build/examples/cnn.pt

`--model resnet` writes a ResNet-style CNN with BatchNorm instead
(examples/python/resnet_bn.py). Any model scripted the same way works:
fedcaf trains its parameters and federates its buffers (integer and bool
ones carried in float32), named and ordered as in its state_dict. Needs
PyTorch (Debian: python3-torch).
"""

import argparse
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F


class CNN(nn.Module):
    """Two 3 x 3 convolutions with 2 x 2 max pooling, two linear layers."""

    def __init__(self, num_channel: int = 1, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(num_channel, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", default="cnn.pt",
                        help="the TorchScript file to write (default: cnn.pt)")
    parser.add_argument("--seed", type=int, default=42,
                        help="seed of the initial weights (default: 42)")
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--model", choices=("cnn", "resnet"), default="cnn")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    if args.model == "resnet":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from resnet_bn import ResNetBN
        net = ResNetBN(num_classes=args.num_classes)
    else:
        net = CNN(num_classes=args.num_classes)
    model = torch.jit.script(net)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    model.save(args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
