"""The sub-pixel check's default sides (issue 35): the search draws masks where a 0.5x resize's align_corners
mismatch has regions to measure, and catches that mismatch at the default settings."""

from __future__ import annotations

import pytest
from hypothesis import settings

from perfsuite.augment.checks import SUBPIXEL_SIDES, check_paired_augmentation
from tests.property.test_subpixel import resize


def test_subpixel_draws_masks_at_the_default_sides() -> None:
    seen: list[tuple[int, int]] = []

    def identity(x, m):  # type: ignore[no-untyped-def]
        seen.append(tuple(m.shape[-2:]))
        return x, m

    check_paired_augmentation(
        identity, num_classes=19, photometric=False, subpixel=True, settings=settings(max_examples=3, database=None)
    )
    drawn = seen[2:]  # the first two calls are the reproducibility probe's fixed 40x52 batch
    assert drawn and all(SUBPIXEL_SIDES[0] <= side <= SUBPIXEL_SIDES[1] for shape in drawn for side in shape), seen


@pytest.mark.slow
def test_a_half_size_resize_with_align_corners_on_the_image_only_is_caught_by_default() -> None:
    """0.5x, image align_corners=True, mask 'nearest': the mismatch the default sides were chosen for (ci profile)."""
    from perfsuite.augment.profiles import register
    from perfsuite.errors import PropertyViolation

    register()
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(
            lambda x, m: resize(x, m, 0.5, True, mask_mode="nearest"),
            num_classes=19,
            photometric=False,
            same_size=False,
            subpixel=True,
            settings=settings.get_profile("ci"),
        )
    assert info.value.cause == "subpixel"
