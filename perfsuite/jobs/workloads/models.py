"""The reference workloads' networks: plain, small, and sized by their scale.

They stand in for the seeds' models (a face-parsing encoder-decoder, a 3.5M
parameter CAPTCHA CNN, a light super-resolution net, a grayscale classifier)
at the sizes that decide whether the GPU is fed, not for accuracy.
"""

from __future__ import annotations

import torch
from torch import nn


def conv_bn_relu(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
    )


class EncoderDecoder(nn.Module):
    """A U-Net style segmenter: ``depth`` downsamplings, skip connections, per-pixel logits."""

    def __init__(self, in_channels: int, num_classes: int, base: int = 32, depth: int = 4) -> None:
        super().__init__()
        widths = [base * 2**i for i in range(depth + 1)]
        self.stem = nn.Sequential(conv_bn_relu(in_channels, widths[0]), conv_bn_relu(widths[0], widths[0]))
        self.down = nn.ModuleList(
            nn.Sequential(conv_bn_relu(widths[i], widths[i + 1], stride=2), conv_bn_relu(widths[i + 1], widths[i + 1]))
            for i in range(depth)
        )
        self.up = nn.ModuleList(nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2) for i in range(depth))
        self.fuse = nn.ModuleList(conv_bn_relu(widths[i] * 2, widths[i]) for i in range(depth))
        self.head = nn.Conv2d(widths[0], num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = [self.stem(x)]
        for block in self.down:
            skips.append(block(skips[-1]))
        y = skips.pop()
        for i in reversed(range(len(self.up))):
            y = self.fuse[i](torch.cat([self.up[i](y), skips.pop()], dim=1))
        return self.head(y)


class RegressionCNN(nn.Module):
    """A strided CNN with global pooling and a linear head (slider-CAPTCHA positions)."""

    def __init__(self, in_channels: int, outputs: int, widths: tuple[int, ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = in_channels
        for w in widths:
            layers += [conv_bn_relu(cin, w, stride=2), conv_bn_relu(w, w)]
            cin = w
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(channels, channels, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class LightSR(nn.Module):
    """EDSR-style light super-resolution: seed 004's base_channels and num_blocks knobs."""

    def __init__(self, channels: int = 3, base_channels: int = 32, num_blocks: int = 4, upscale: int = 2) -> None:
        super().__init__()
        self.head = nn.Conv2d(channels, base_channels, 3, padding=1)
        self.body = nn.Sequential(*[ResidualBlock(base_channels) for _ in range(num_blocks)])
        self.tail = nn.Sequential(
            nn.Conv2d(base_channels, channels * upscale**2, 3, padding=1), nn.PixelShuffle(upscale)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feat = self.head(x)
        return self.tail(feat + self.body(feat))


class SmallClassifier(RegressionCNN):
    """The grayscale classifier: the same strided CNN with class logits."""


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
