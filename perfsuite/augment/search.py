"""How the property search runs: its Hypothesis settings, and the callable made to be reproducible first.

* **Settings** (:func:`search_settings`). Under pytest the active profile is
  used (perfsuite's plugin registers ``ci``/``dev``/``nightly``). Outside
  pytest (a script, a notebook) nobody loaded one, so the check picks the same
  way the plugin does (``PERFSUITE_HYPOTHESIS_PROFILE``, else ``ci`` when
  ``CI`` is set) and never writes ``.hypothesis/`` into the working directory:
  no example database, and Hypothesis's other storage in a temporary
  directory. A caller's own ``settings=`` is kept, with perfsuite's health-check
  suppressions and no deadline merged in (the first call of a Kornia or CUDA
  transform is slow; timings are not what the properties check).
* **Reproducibility** (:func:`assert_reproducible`). Hypothesis replays a
  failing example to shrink it; a callable that draws from a generator
  perfsuite does not seed (its own ``np.random.default_rng()``, an
  albumentations pipeline inside a function, ``CpuAugment(seed=None)``) gives
  another answer each time, and Hypothesis ends in a ``FlakyFailure`` that says
  nothing about why. So one batch goes through the callable twice under the
  same seed before the search starts; a difference, or a first call that
  raises, is an argument error that says what to write.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from perfsuite.augment.outputs import Output
from perfsuite.augment.painting import encode, palette_for
from perfsuite.errors import PropertyArgumentError, PropertyViolation

FUNC = "check_paired_augmentation"
DEFAULT_DEADLINE = datetime.timedelta(milliseconds=200)  # Hypothesis's own default, which no caller meant for us

REPRODUCE = (
    "Make it reproducible: perfsuite seeds torch's, NumPy's and Python's global generators before every call, "
    "so either draw from those, or pass factory=True with fn = a function of the seed that builds the "
    "transform seeded (lambda seed: CpuAugment(recipe, 'mask', seed=seed); lambda seed: A.Compose([...], "
    "seed=seed); lambda seed: MyAug(generator=torch.Generator().manual_seed(seed)))"
)


def _inside_pytest() -> bool:
    return "PYTEST_CURRENT_TEST" in os.environ


def search_settings(user: Any = None) -> Any:
    """The settings the search runs under (see the module docstring)."""
    from hypothesis import HealthCheck, settings

    from perfsuite.augment import profiles as hypothesis_profiles

    outside = not _inside_pytest()
    base = user
    if base is None:
        base = settings.default
        if outside and settings.get_current_profile_name() in ("default", "ci"):
            name = hypothesis_profiles.choose(None)
            if name is not None:
                if name not in hypothesis_profiles.PROFILES:
                    raise PropertyArgumentError(
                        f"{hypothesis_profiles.ENV}={name!r} is not a perfsuite profile; write one of "
                        f"{', '.join(hypothesis_profiles.PROFILES)}"
                    )
                hypothesis_profiles.register()
                base = settings.get_profile(name)
    changes: dict[str, Any] = {
        "suppress_health_check": sorted(
            {*base.suppress_health_check, HealthCheck.too_slow, HealthCheck.data_too_large}, key=lambda h: h.value
        )
    }
    if base.deadline == DEFAULT_DEADLINE:
        changes["deadline"] = None
    if outside:
        hypothesis_profiles.storage_outside_cwd()
        if user is None:
            changes["database"] = None
    return settings(base, **changes)


PROBE_BATCH = 4  # a 50% op drawn per sample gives the same four draws twice in 1 of 16 probes


def _probe_batch(size: tuple[int, int], space: Any) -> np.ndarray:
    """Samples of a few labels in blocks off the centre (a flip or a shift changes them), in ``space``'s dtype."""
    h, w = size
    labels = [v for v in (0, 1, 2, 3) if v < space.num_classes] or [0]
    masks = np.full((PROBE_BATCH, h, w), labels[0], space.mask_dtype)
    masks[0::2, : h // 3, : w // 2] = labels[min(1, len(labels) - 1)]
    masks[1::2, h // 2 :, w // 3 :] = labels[min(2, len(labels) - 1)]
    masks[:, h // 4 : h // 2, 3 * w // 4 :] = labels[-1]
    return masks


def assert_reproducible(
    paired: Callable[..., Output], space: Any, layout: str, size: tuple[int, int] = (40, 52), seed: int = 12345
) -> None:
    """Call ``paired`` twice on one batch under one seed: it must not raise, and must give the same output."""
    masks = _probe_batch(size, space)
    images = encode(masks, palette_for(masks))
    try:
        first = paired(images, masks, seed)
    except (PropertyViolation, PropertyArgumentError):  # the adapter's own findings say what to write already
        raise
    except Exception as exc:
        raise PropertyArgumentError(
            f"{FUNC}(layout={layout!r}): the first call, on a batch of {PROBE_BATCH} {size[0]}x{size[1]} masks, raised "
            f"{type(exc).__name__}: {exc}. If the callable takes other inputs than layout={layout!r} gives it, "
            "pass the layout of its signature (perfsuite's CpuAugment: layout='numpy', factory=True, "
            "fn=lambda seed: CpuAugment(recipe, 'mask', seed=seed); see docs/properties.md); if it needs larger "
            "inputs, pass output_size=(H, W) or 'auto', or min_side=..."
        ) from exc
    second = paired(images, masks, seed)
    what = _difference(first, second)
    if what is not None:
        raise PropertyArgumentError(
            f"{FUNC}: the callable gave different {what} for the same batch and seed, so a failure could not be "
            f"replayed (Hypothesis would end in a FlakyFailure). It draws from a random generator perfsuite does "
            f"not seed. {REPRODUCE}"
        )


def _difference(a: Output, b: Output) -> str | None:
    if a.ragged != b.ragged:
        return "output sizes"
    pairs_m = zip(a.masks, b.masks) if a.ragged else [(a.masks, b.masks)]
    pairs_i = zip(a.images, b.images) if a.ragged else [(a.images, b.images)]
    for x, y in pairs_m:
        if np.shape(x) != np.shape(y) or not np.array_equal(x, y):
            return "masks"
    for x, y in pairs_i:
        if np.shape(x) != np.shape(y) or not np.allclose(x, y, atol=1.0):  # 1/255: GPU kernels may differ in ulps
            return "images"
    return None


def flaky_advice(exc: BaseException) -> PropertyArgumentError:
    """What a ``FlakyFailure`` the reproducibility probe did not foresee means, as an argument error."""
    return PropertyArgumentError(
        f"{FUNC}: a failing example did not fail again when Hypothesis replayed it ({type(exc).__name__}): the "
        f"callable's output for one batch and seed changes from call to call (a generator perfsuite does not "
        f"seed, drawn on only some batches). {REPRODUCE}"
    )
