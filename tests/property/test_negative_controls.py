"""The properties must catch every known-bad variant, and shrink the evidence to something small.

A property that lets one of these through is not testing anything, so each
test runs the same :func:`check_paired_augmentation` that perfsuite's own
paths pass (test_alignment, test_labels, test_pairing) and expects a
:class:`PropertyViolation` whose falsifying batch is tiny.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import settings

from perfsuite.augment import seed_variants as sv
from perfsuite.augment.checks import PropertyViolation, check_paired_augmentation

pytestmark = pytest.mark.filterwarnings("ignore:RandomCutMixV2 currently uses:DeprecationWarning")

NUM_CLASSES = 19  # seed 000's face parsing
MAX_SIDE = 20  # the strategies draw sides 9..48; a shrunk example stays near the minimum
MAX_BATCH = 4


def _search(at_least: int) -> settings:
    """The active profile, with room to find rare branches."""
    return settings(settings.default, max_examples=max(settings.default.max_examples, at_least))


def _caught(fn, at_least: int = 40, max_side: int = MAX_SIDE, **declared) -> PropertyViolation:
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(fn, num_classes=NUM_CLASSES, settings=_search(at_least), **declared)
    err = info.value
    b, h, w = err.example.masks.shape
    assert b <= MAX_BATCH and max(h, w) <= max_side, f"shrunk only to B={b}, {h}x{w}: {err}"
    print(f"{err.example} seed={err.seed}: {err}")  # shown with -s / -rA: the report quotes these
    return err


def test_seed_color_jitter_raises_on_four_channels():
    """As written, seed 000 never ran: ColorJitter refuses the image+mask 4-channel tensor."""
    images, masks = torch.rand(2, 3, 16, 16), torch.randint(0, NUM_CLASSES, (2, 16, 16))
    torch.manual_seed(0)
    aug = sv.SeedConcat(with_color_jitter=True)
    aug.aug[3].p = 1.0  # make the jitter fire on the first call
    with pytest.raises(Exception, match=r"4, 16, 16|\(\*, 3, H, W\)"):  # Kornia's wording varies by op
        aug(images, masks)


def test_seed_concat_is_caught():
    err = _caught(sv.SeedConcat(NUM_CLASSES))
    assert err.prop in ("valid labels", "alignment")
    assert err.example.masks.shape[0] <= 2  # not a batching bug: one or two samples show it


def test_seed_advanced_is_caught():
    _caught(sv.SeedAdvanced(NUM_CLASSES))


def test_independent_parameters_are_caught_by_alignment():
    # Independently drawn geometry shows as misalignment only where the two draws differ by more than the
    # checker's one-pixel margin, which on the smallest frames depends on the draw: it has shrunk to 9x38
    # in some full-suite orders (Kornia draws from torch's global generator), so the side bound is looser here.
    err = _caught(sv.IndependentParams(), photometric=False, max_side=40)
    assert err.prop == "alignment"


def test_bilinear_mask_resampling_invents_labels():
    err = _caught(sv.BilinearMasks(), photometric=False)
    assert err.prop == "valid labels"
    assert "appeared" in str(err)


# At the seed's p=0.3 (gated twice, as the seed does) a batch is mixed 9% of the time: search longer.
SEED_P = pytest.mark.parametrize(("p", "at_least"), [(1.0, 40), (0.3, 200)], ids=["always", "seed-p"])


@SEED_P
def test_images_only_cutmix_is_caught(p, at_least):
    err = _caught(sv.ImagesOnlyCutMix(p), at_least, photometric=False)
    assert err.prop in ("alignment", "pairing")
    assert err.example.masks.shape[0] >= 2  # it takes two samples to mix


def test_images_only_cutmix_is_caught_even_when_declared_mixing():
    """Declaring mixes_samples loosens the label check, not alignment: masks must follow the box."""
    err = _caught(sv.ImagesOnlyCutMix(1.0), photometric=False, mixes_samples=True)
    assert err.prop == "alignment"


@SEED_P
def test_images_only_mixup_is_caught(p, at_least):
    err = _caught(sv.ImagesOnlyMixUp(p), at_least, photometric=False)
    assert err.prop == "alignment" and "MixUp" in str(err)
