"""Repository-wide test setup: a shared dataset cache, and the device option.

Datasets are generated deterministically and atomically, so every test
process (pytester subprocesses included) can share one cache directory.
"""

from __future__ import annotations

import os
import tempfile

import pytest


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PERFSUITE_CACHE", os.path.join(tempfile.gettempdir(), "perfsuite-test-cache"))


@pytest.fixture(scope="session")
def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
