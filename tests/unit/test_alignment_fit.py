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
    f = fit(found, (101, 101))  # about the frame's centre, (50, 50)
    assert f is not None
    return f


def test_a_scale_in_both_axes_is_flagged():
    f = _fit(lambda ry, rx: (0.008 * ry, 0.008 * rx))
    assert f.flagged() == "scale" and f.scale_in_both_axes and f.score() > 1.0


def test_mirrored_rounding_in_x_alone_is_not_a_scale():
    """A mirror-symmetric mask rounds mirror-wise: left regions' dx the negatives of the right ones', y clean.
    An isotropic fit reads that as a scale of half the x one; it does not show in y, so it is not flagged."""
    f = _fit(lambda ry, rx: (0.0, 0.012 * rx))
    assert f.linear_px > 0.2 and f.linear_px > 5 * f.linear_se  # what the isotropic test alone would flag
    assert not f.scale_in_both_axes and f.flagged() is None and f.score() < 1.0


def test_a_rotation_needs_no_per_axis_agreement():
    f = _fit(lambda ry, rx: (-0.008 * rx, 0.008 * ry))
    assert f.flagged() == "scale"


# -- the mask the image's geometry predicts (perfsuite/augment/alignment.py, steps 2 and 3) ------------------


def _blob_mask(side=96, repeat=False):
    """A 3x3 grid of discs; labels 1..9, or with ``repeat`` 1..7 then 1 and 2 again (two labels in two places)."""
    yy, xx = np.mgrid[0:side, 0:side]
    mask = np.zeros((side, side), np.int64)
    for k in range(9):
        cy, cx = (side * (2 * v + 1) / 6 + v for v in divmod(k, 3))  # off-centre: no symmetry of the frame
        mask[(yy - cy) ** 2 + (xx - cx) ** 2 <= (side / 12 + k % 2) ** 2] = 1 + (k % 7 if repeat else k)
    return mask


def _paint(mask):
    from perfsuite.augment.painting import encode, palette_for

    palette = palette_for(mask[None])
    return encode(mask[None], palette)[0].astype(float), palette


def test_nearest_rendering_reproduces_a_flip_exactly():
    from perfsuite.augment.alignment import _render_nearest

    mask = _blob_mask()
    w = mask.shape[1]
    flip = np.array([[1.0, 0.0], [0.0, -1.0], [0.0, w - 1.0]])  # [y, x, 1] @ M: x -> w - 1 - x
    predicted, clear = _render_nearest(mask, flip, mask.shape)
    assert (predicted == mask[:, ::-1]).all() and clear.all()  # integer sample points: no tie anywhere


def test_predicted_minus_actual_is_zero_for_a_correct_flip_and_one_pixel_for_a_shifted_mask():
    from perfsuite.augment.alignment import offsets

    for repeat in (False, True):  # a label in three places: the correspondence is searched for
        mask = _blob_mask(repeat=repeat)
        image, palette = _paint(mask)
        found = offsets(image[:, ::-1], mask[:, ::-1], mask, palette, skip=set())
        assert len(found) == 9 and all(o.dy == 0 and o.dx == 0 for o in found)
        shifted = offsets(image[:, ::-1], np.roll(mask[:, ::-1], 1, axis=1), mask, palette, skip=set())
        assert shifted and all(abs(o.dx + 1.0) < 1e-9 and o.dy == 0 for o in shifted)


def test_a_symmetric_layout_leaves_the_geometry_undecided():
    """Two labels on a mirror-symmetric layout: flipped or not, the regions match equally well; not judged."""
    from perfsuite.augment.alignment import offsets

    side = 96
    yy, xx = np.mgrid[0:side, 0:side]
    mask = np.zeros((side, side), np.int64)
    for k in range(9):
        cy, cx = (side * (2 * v + 1) / 6 for v in divmod(k, 3))
        mask[(yy - cy) ** 2 + (xx - cx) ** 2 <= (side / 9) ** 2] = 1 + (k % 3 == 1)  # columns 1, 2, 1
    image, palette = _paint(mask)
    assert offsets(image, mask, mask, palette, skip=set()) == []
