"""Hypothesis profiles shipped with perfsuite: ``ci``, ``dev`` and ``nightly``.

perfsuite's pytest plugin registers them before Hypothesis's own plugin reads
``--hypothesis-profile``, so any project with perfsuite installed can write
``pytest --hypothesis-profile=ci``; or set ``PERFSUITE_HYPOTHESIS_PROFILE=ci``.

* ``ci``: derandomized (a red run is reproducible, a green one is not luck),
  30 examples, no explain phase, **no database**, and Hypothesis's other
  storage (its constants cache) goes to a temporary directory: nothing is
  written into the working directory.
* ``dev``: random, 50 examples, failures remembered in the local ``.hypothesis``.
* ``nightly``: 1000 examples, to find what ``ci`` never draws.

No deadlines anywhere: Kornia's first call and shared CI cores make
per-example timings noise, and timings are not what the properties check.

Which profile is loaded (:func:`choose`): ``--hypothesis-profile`` if given
(Hypothesis loads it), else ``PERFSUITE_HYPOTHESIS_PROFILE``, else ``ci`` when
the ``CI`` environment variable is set (GitHub Actions, GitLab, most CI
services set it) and nobody has loaded another profile; otherwise Hypothesis's
own default is left alone.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

PROFILES = ("ci", "dev", "nightly")
ENV = "PERFSUITE_HYPOTHESIS_PROFILE"
_registered = False


def register() -> None:
    """Register the three profiles (idempotent; imports Hypothesis)."""
    global _registered
    if _registered:
        return
    from hypothesis import HealthCheck, Phase, settings

    common: dict[str, Any] = dict(
        deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
    )
    # No explain phase in ci: it reruns the shrunk failure with each part varied, and on the negative
    # controls that is most of the suite's time; the shrunk example and message say enough.
    no_explain = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
    settings.register_profile(
        "ci", max_examples=30, derandomize=True, database=None, print_blob=True, phases=no_explain, **common
    )
    settings.register_profile("dev", max_examples=50, **common)
    settings.register_profile("nightly", max_examples=1000, **common)
    _registered = True


def load(name: str) -> None:
    """Load a perfsuite profile by name; ``ci`` also moves Hypothesis's storage out of the working directory."""
    from hypothesis import settings

    from perfsuite.errors import PerfsuiteError

    if name not in PROFILES:
        raise PerfsuiteError(f"{ENV}={name!r} is not a perfsuite profile; write one of {', '.join(PROFILES)}")
    register()
    if name == "ci":
        storage_outside_cwd()
    settings.load_profile(name)


def storage_outside_cwd() -> None:
    """Hypothesis writes a constants cache under ``.hypothesis/`` even without a database; send it to a temp dir."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    where = os.path.join(tempfile.gettempdir(), f"perfsuite-hypothesis-{os.getuid() if hasattr(os, 'getuid') else 0}")
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = where
    try:
        from hypothesis import configuration

        configuration.set_hypothesis_home_dir(where)
    except (ImportError, AttributeError):  # pragma: no cover - older Hypothesis reads the variable itself
        pass


def choose(option: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The perfsuite profile to load (None: leave Hypothesis's choice alone)."""
    env = os.environ if environ is None else environ
    if option:  # Hypothesis's plugin loads it; ours only needs to be registered
        return option if option == "ci" else None
    if env.get(ENV):
        return env[ENV]
    if env.get("CI", "").lower() not in ("", "0", "false", "no"):
        from hypothesis import settings

        # "ci" too: Hypothesis loads its own built-in ci profile when it detects CI (ours replaces it).
        if settings.get_current_profile_name() in ("default", "ci"):
            return "ci"
    return None
