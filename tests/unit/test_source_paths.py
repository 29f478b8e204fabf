"""A site names its file the same from every working directory and on every machine (issue 56 item 2).

Relative to the project's git top level (else the script's folder); an installed package's or the standard
library's file from its package on, without the virtualenv's path.
"""

from __future__ import annotations

import importlib.util
import multiprocessing.queues
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import perfsuite
from perfsuite.core import source_paths
from perfsuite.core.results import Result
from perfsuite.core.source_paths import anchored_at, source_path
from perfsuite.harness.runner import RunSpec, run
from perfsuite.judge.engine import compare_results
from perfsuite.probes.cost import CostProbe
from perfsuite.probes.loadercount import LoaderCountProbe
from perfsuite.probes.syncs import SyncProbe

JOB = """\
import torch
from torch.utils.data import DataLoader, Dataset

from perfsuite import Job


class Squares(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        return torch.full((4,), float(i)).pow(2), torch.tensor([float(i)])


MODEL = torch.nn.Linear(4, 1)


def step(batch):
    x, y = batch
    loss = torch.nn.functional.mse_loss(MODEL(x), y)
    loss.backward()
    loss.item()  # a host sync: this line is its site
    return loss


JOB = Job(step=step, loader=DataLoader(Squares(), batch_size=4), model=MODEL, name="segjob")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``<tmp>/userjob``: a git repository holding ``segjob.py``."""
    folder = tmp_path / "userjob"
    folder.mkdir()
    (folder / "segjob.py").write_text(JOB)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


def _run_from(cwd: Path, relative: str, name: str, monkeypatch: pytest.MonkeyPatch) -> Result:
    """Import the job's file by its path relative to ``cwd`` (as ``--import`` would) and run it there."""
    monkeypatch.chdir(cwd)
    spec = importlib.util.spec_from_file_location(name, relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    probes = [SyncProbe(), CostProbe(), LoaderCountProbe()]
    return run(RunSpec(module.JOB, steps=3, warmup=1, observe_steps=2, sol_steps=0), probes=probes)


def test_the_same_job_run_from_its_folder_and_its_parent_compares_with_no_site_gone_or_new(project, monkeypatch):
    base = _run_from(project, "segjob.py", "segjob_here", monkeypatch)
    head = _run_from(project.parent, os.path.join("userjob", "segjob.py"), "segjob_above", monkeypatch)
    line = JOB.splitlines().index("    loss.item()  # a host sync: this line is its site") + 1
    for result in (base, head):
        sites = [s["site"] for s in result.metric("syncs_per_step").detail["sites"]]
        assert f"segjob.py:{line}" in sites, sites  # the project's root is the repository, not the directory
    with_sites = [n for n, m in base.metrics.items() if m.available and m.detail.get("sites")]
    assert {"syncs_per_step", "ops_per_step"} <= set(with_sites)
    for name in with_sites:
        assert [s["site"] for s in base.metric(name).detail["sites"]] == [
            s["site"] for s in head.metric(name).detail["sites"]
        ], name
    messages = [v.message for v in compare_results(base, head, "segjob")]
    assert not [m for m in messages if "(gone)" in m or "(new)" in m], messages


def test_a_file_is_named_from_its_repository_from_every_directory(project, monkeypatch):
    job = str(project / "segjob.py")
    for cwd in (project, project.parent, Path(perfsuite.__file__).parent):
        monkeypatch.chdir(cwd)
        assert source_path(job) == "segjob.py"
        assert source_path(os.path.relpath(job)) == "segjob.py"


def test_a_library_file_is_named_from_its_package_on():
    assert source_path(torch.__file__) == os.path.join("torch", "__init__.py")
    assert source_path(multiprocessing.queues.__file__) == os.path.join("multiprocessing", "queues.py")


def test_a_file_outside_any_repository_is_named_from_the_scripts_folder(tmp_path, monkeypatch):
    script = tmp_path / "a" / "train.py"
    script.parent.mkdir()
    script.write_text("")
    monkeypatch.chdir(tmp_path)
    assert source_path(str(script)) == str(script)  # nothing to name it from: the same absolute path everywhere
    with anchored_at(script.parent):
        assert source_path(str(script)) == "train.py"
        assert source_path(sys.executable) != "train.py"


def test_a_job_module_outside_any_repository_names_its_files_from_its_folder(tmp_path, monkeypatch):
    """``perfsuite run --import my_jobs`` in a folder without git: the job's files from that folder, from any
    working directory (perfsuite.cli.common.import_modules)."""
    from perfsuite.cli.common import import_modules

    monkeypatch.setattr(source_paths, "_job_folder", [])
    folder = tmp_path / "jobs"
    (folder / "lib").mkdir(parents=True)
    (folder / "my_jobs_56.py").write_text("")
    helper = folder / "lib" / "helper.py"
    helper.write_text("")
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert source_path(str(helper)) == str(helper)  # before: nothing to name it from
    import_modules(["my_jobs_56"])
    monkeypatch.delitem(sys.modules, "my_jobs_56")
    monkeypatch.chdir(tmp_path)
    assert source_path(str(helper)) == os.path.join("lib", "helper.py")
