"""The sub-pixel fit on hand-made region offsets: exact and seeded, no images (perfsuite/augment/alignment.py)."""

from __future__ import annotations

import numpy as np

from perfsuite.augment.alignment import Offset, fit

# a 6x6 grid of regions over a 100-px frame, as a batch of four pooled faces gives about
GRID = (-40.0, -24.0, -8.0, 8.0, 24.0, 40.0)
CENTRES = [(50.0 + ry, 50.0 + rx) for ry in GRID for rx in GRID]
NOISE = np.random.default_rng(0).normal(0.0, 0.15, size=(len(CENTRES), 2))  # rounding noise, fixed


def _fit(field):
    found = []
    for k, (cy, cx) in enumerate(CENTRES):
        dy, dx = field(cy - 50.0, cx - 50.0)
        found.append(Offset(k, dy + NOISE[k, 0], dx + NOISE[k, 1], 400, 80, (0.01, 0.01), (cy, cx)))
    f = fit(found, centre=(50.0, 50.0))
    assert f is not None
    return f


def test_a_scale_in_both_axes_is_flagged():
    f = _fit(lambda ry, rx: (0.008 * ry, 0.008 * rx))
    assert f.flagged() == "scale" and f.scale_in_both_axes and f.score() > 1.0


def test_mirrored_rounding_in_x_alone_is_not_a_scale():
    """A mirror-symmetric mask rounds mirror-wise: left regions' dx the negatives of the right ones', y clean.
    An isotropic fit reads that as a scale of half the x one; it does not show in y, so it is not flagged."""
    f = _fit(lambda ry, rx: (0.0, 0.012 * rx))
    assert f.linear_px > 0.25 and f.linear_px > 5 * f.linear_se  # what the isotropic test alone flagged
    assert not f.scale_in_both_axes and f.flagged() is None and f.score() < 1.0


def test_a_rotation_needs_no_per_axis_agreement():
    f = _fit(lambda ry, rx: (-0.008 * rx, 0.008 * ry))
    assert f.flagged() == "scale"
