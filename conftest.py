"""Repository-wide test setup: a shared dataset cache, and the device option.

Datasets are generated deterministically and atomically, so every test
process (pytester subprocesses included) can share one cache directory: the
one the docs name for every command (``$PERFSUITE_CACHE``, else
``~/.cache/perfsuite``), set here so that subprocesses find the same.
"""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    from perfsuite.jobs.workloads.data import default_cache_dir

    os.environ.setdefault("PERFSUITE_CACHE", str(default_cache_dir()))


@pytest.fixture(scope="session")
def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
