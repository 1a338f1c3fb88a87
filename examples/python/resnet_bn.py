"""A small ResNet-style CNN for 28 x 28 Fashion-MNIST images, with
BatchNorm after every convolution: its state_dict holds int64
`num_batches_tracked` buffers, as every ResNet's does. fedcaf federates it
unmodified (integer tensors travel in the model's floating dtype and come
back as the clients' weighted mean, rounded: docs/protocol.md, "Integer and
bool tensors"). TorchScript-compatible (examples/python/export_torchscript.py
--model resnet)."""

import torch
from torch import nn


class ResNetBN(nn.Module):
    """A stem convolution, one residual block of two, max pooling and a
    linear layer; BatchNorm after every convolution."""

    def __init__(self, num_channel: int = 1, num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(num_channel, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.block = nn.Sequential(
            nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.head = nn.Sequential(
            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 7 * 7, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return self.head(x)
