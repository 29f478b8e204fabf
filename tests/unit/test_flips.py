"""How a sample's mirroring and its regions' identities are read (perfsuite/augment/flips.py), on hand-made masks."""

from __future__ import annotations

import numpy as np

from perfsuite.augment.flips import mirrored, shown_labels
from perfsuite.augment.labels import LabelSpace
from perfsuite.augment.painting import OUTSIDE, encode, palette_for

SPACE = LabelSpace.declare(19, 255, mask_dtype="int64", flip_pairs=[(4, 5)])


def _face() -> np.ndarray:
    """Skin (1) with a left eye (4) and a right eye (5), a nose (2) and a mouth (3) off the axis: asymmetric."""
    mask = np.ones((20, 24), np.int64)
    mask[4:8, 3:8], mask[4:8, 15:20], mask[9:13, 10:13], mask[15:18, 6:17] = 4, 5, 2, 3
    return mask


def test_a_flip_a_crop_of_a_flip_and_no_flip_are_told_apart():
    mask = _face()
    assert mirrored(mask, mask[:, ::-1], [1, 2, 3, 4, 5]) is True
    assert mirrored(mask, mask[::-1, ::-1], [1, 2, 3, 4, 5]) is False  # a half turn is not a mirror
    assert mirrored(mask, mask, [1, 2, 3, 4, 5]) is False
    assert mirrored(mask, mask[:, ::-1][2:18, 3:21], [1, 2, 3, 4, 5]) is True  # a crop of the flip


def test_a_mirror_symmetric_sample_is_left_undecided():
    mask = np.ones((12, 12), np.int64)
    mask[3:6, 2:4], mask[3:6, 8:10] = 2, 2  # the same label on both sides
    assert mirrored(mask, mask[:, ::-1], [1, 2]) is None


def _shown(mask_in, mask_out, image):
    palette = palette_for(mask_in[None])
    return shown_labels(image, mask_out, set(np.unique(mask_in).tolist()), palette, SPACE, 1, photometric=True)


def test_under_jitter_a_pair_is_told_by_the_direction_of_its_colour_difference():
    mask = _face()
    image = encode(mask[None], palette_for(mask[None]))[0] * 0.7 + 20  # brightness and contrast: no palette colour
    assert set(np.unique(_shown(mask, mask, image)).tolist()) == {1, 2, 3, 4, 5}  # the mask kept the eyes
    swapped = SPACE.apply_map(mask)
    shown = _shown(mask, swapped, image)
    assert (shown[swapped == 4] == 5).all() and (shown[swapped == 5] == 4).all()  # the image still shows 5 there


def test_a_colour_map_that_reorders_colours_leaves_the_pair_undecided():
    mask = _face()
    image = 255.0 - encode(mask[None], palette_for(mask[None]))[0]  # inverted: every direction reversed
    shown = _shown(mask, mask, image)
    assert (shown[np.isin(mask, [4, 5])] == OUTSIDE).all()  # not told, never guessed
    assert (shown[mask == 2] == 2).all()  # labels that do not swap keep their identity


def test_a_pair_with_one_member_in_the_input_needs_no_colour():
    mask = _face()
    mask[mask == 5] = 1  # only the left eye went in
    out = np.where(mask == 4, 5, mask)  # the mask calls it the right eye
    image = np.zeros((*mask.shape, 3))  # colours tell nothing
    assert (_shown(mask, out, image)[out == 5] == 4).all()
