"""DataLoader workers' sockets under a long TMPDIR (a pytest-xdist worker's tmp_path): their folder is made in
a short system directory, so a worker can bind its socket and send its batches (perfsuite.harness.socket_folder).
Under such a TMPDIR a worker's queue thread failed with "AF_UNIX path too long" and exec waited forever."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import multiprocessing, os, sys, tempfile
from multiprocessing.connection import Listener
from perfsuite.harness.socket_folder import share_socket_folder

folder = share_socket_folder()
print(folder)

def bind(out):  # what a DataLoader worker does to send a batch's file descriptors (resource_sharer)
    from multiprocessing import util
    with Listener() as listener:
        out.put((util.get_temp_dir(), listener.address))

queue = multiprocessing.get_context("fork").SimpleQueue()
child = multiprocessing.get_context("fork").Process(target=bind, args=(queue,))
child.start()
child.join(30)
print(child.exitcode)
print(*(queue.get() if child.exitcode == 0 else ("-", "-")))
"""


@pytest.mark.parametrize("depth", [1, 6])  # a short TMPDIR is kept; a long one is not used for the sockets
def test_workers_sockets_bind_under_any_tmpdir(tmp_path: Path, depth: int) -> None:
    tmpdir = tmp_path.joinpath(*["popen-gw0-test_exec_stopping"] * depth) if depth > 1 else Path("/tmp")
    tmpdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    folder, code, (shared, address) = *done.stdout.split("\n")[:2], done.stdout.split("\n")[2].split()
    assert code == "0" and shared == folder and address.startswith(folder)  # the worker used the main's folder
    assert Path(folder).parent == (tmpdir if depth == 1 else Path("/tmp"))
    assert not Path(folder).exists()  # removed as the main process exited
