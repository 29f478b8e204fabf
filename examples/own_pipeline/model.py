"""A small BiSeNet-style network: a spatial path at 1/8 and a context path at 1/16, fused."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def conv_bn_relu(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class AttentionRefinement(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = conv_bn_relu(channels, channels)
        self.attention = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, channels, 1), nn.Sigmoid())

    def forward(self, x):
        x = self.conv(x)
        return x * self.attention(x)


class BiSeNet(nn.Module):
    def __init__(self, num_classes, width=16):
        super().__init__()
        w = width
        self.spatial = nn.Sequential(conv_bn_relu(3, w, 2), conv_bn_relu(w, w, 2), conv_bn_relu(w, 2 * w, 2))
        self.backbone = nn.Sequential(
            conv_bn_relu(3, w, 2),
            conv_bn_relu(w, 2 * w, 2),
            conv_bn_relu(2 * w, 2 * w, 2),
            conv_bn_relu(2 * w, 4 * w, 2),
        )
        self.arm = AttentionRefinement(4 * w)
        self.fuse = conv_bn_relu(6 * w, 4 * w)
        self.head = nn.Conv2d(4 * w, num_classes, 1)

    def forward(self, x):
        size = x.shape[-2:]
        spatial = self.spatial(x)
        context = self.arm(self.backbone(x))
        context = F.interpolate(context, size=spatial.shape[-2:], mode="bilinear", align_corners=False)
        out = self.head(self.fuse(torch.cat([spatial, context], dim=1)))
        return F.interpolate(out, size=size, mode="bilinear", align_corners=False)
