"""Session fixtures for the fault tests: each reference and each fault runs at most once per session.

Statistical catches compare a fault's run with the unchanged run of the same
session, never with an absolute time, so both come from here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from perfsuite.core.results import Result


@pytest.fixture(scope="session")
def runs() -> Callable[..., Result]:
    """``runs(reference, fault=None, again=0)``: the Result, run once per session and reused."""
    from perfsuite.tools.catch import run_reference

    cache: dict[tuple[str, str | None, int], Result] = {}
    cache_dir = Path(os.environ["PERFSUITE_CACHE"]) if os.environ.get("PERFSUITE_CACHE") else None

    def get(reference: str, fault: str | None = None, again: int = 0) -> Result:
        key = (reference, fault, again)
        if key not in cache:
            cache[key] = run_reference(reference, fault=fault, cache_dir=cache_dir)
        return cache[key]

    return get


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use ``runs`` train the reference workloads for real (bf16, torch.compile, worker processes):
    they are ``slow``, out of the ``pytest -m "not slow"`` inner loop and always in ``nox -s tests``."""
    here = Path(__file__).parent
    for item in items:
        if "runs" in getattr(item, "fixturenames", ()) and here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.slow)
