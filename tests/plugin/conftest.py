"""Fixtures for the plugin's end-to-end tests: a pytester project with a tiny registered workload.

The workload is 8 samples of 16x16 grey images and a linear model, so a run
takes well under a second and the whole directory stays around a minute on
two cores. Inner sessions run in-process (torch is imported once).
"""

from __future__ import annotations

import contextlib

import pytest
from perfsuite_pytester import TINY_WORKLOAD


@pytest.fixture(scope="session")
def _warm_imports(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Run one tiny workload out here first, so every module a run imports lazily is loaded.

    In-process pytester sessions drop the modules they imported when they end,
    and C extensions (numpy, torch) cannot be imported a second time.
    """
    from perfsuite.core.knobs import Knobs
    from perfsuite.harness.runner import RunSpec, run

    with contextlib.suppress(ImportError):
        import matplotlib.figure  # noqa: F401  (the PNG report)

    namespace: dict = {}
    exec(TINY_WORKLOAD.replace("@register_workload", ""), namespace)
    run(
        RunSpec(
            namespace["Tiny"](),
            "smoke",
            Knobs.from_flat(aug="cpu", num_workers=0, device="cpu"),
            steps=2,
            warmup=1,
            observe_steps=1,
            cache_dir=tmp_path_factory.mktemp("warm"),
        )
    )


@pytest.fixture
def project(
    _warm_imports: None,
    pytester: pytest.Pytester,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> pytest.Pytester:
    """A pytester directory whose conftest registers ``plugin_tiny``; datasets cached per session.

    Inner sessions run in this process, so the workloads they register go into a copy of the
    registry that is dropped afterwards: other tests still see exactly the reference workloads.
    """
    from perfsuite.jobs import registry

    registry.workload_names()  # load the reference workloads first, so the copy holds them
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    cache = tmp_path_factory.getbasetemp() / "perfsuite-cache"
    monkeypatch.setenv("PERFSUITE_CACHE", str(cache))
    pytester.makeconftest(TINY_WORKLOAD)
    return pytester
