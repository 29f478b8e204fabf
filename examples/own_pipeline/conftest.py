"""Test data: a dozen tiny faces written as real JPEG/PNG files, once per session."""

import pytest
from make_data import write_dataset


@pytest.fixture(scope="session")
def face_data(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("faces"), count=12, size=64)
