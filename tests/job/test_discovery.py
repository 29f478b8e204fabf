"""Workloads, jobs and probes from other packages: entry points, and `perfsuite run --import MODULE`."""

from __future__ import annotations

import json
import textwrap

import pytest

from perfsuite.cli import main as cli
from perfsuite.jobs import registry

PLUGIN = '''
import torch
import perfsuite


def make(device):
    """A tiny job shipped by another package."""
    model = torch.nn.Linear(2, 1).to(device)
    loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4)
    return perfsuite.Job(step=lambda b: model(b).pow(2).mean(), loader=loader, model=model, name="ep_job")


class Steps(perfsuite.Probe):
    name = "steps"

    def metrics(self, timings):
        return [perfsuite.Metric("plugin_steps", timings.steps, "steps")]
'''


@pytest.fixture
def isolated(monkeypatch):
    registry.workload_names()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_JOBS", dict(registry._JOBS))
    monkeypatch.setattr(registry, "_LOADED_GROUPS", {})


@pytest.fixture
def installed(tmp_path, monkeypatch, isolated):
    """A distribution 'ep-plugin' installed on sys.path: dist-info with entry points, and its module."""
    (tmp_path / "ep_plugin_mod.py").write_text(PLUGIN)
    info = tmp_path / "ep_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""\
        [perfsuite.workloads]
        ep_faces = ep_plugin_mod:make

        [perfsuite.probes]
        steps = ep_plugin_mod:Steps
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_perfsuite_list_shows_an_entry_point_job(installed, capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "ep_faces" in out and "A tiny job shipped by another package." in out
    assert cli.main(["list", "--json"]) == 0
    assert {"name": "ep_faces", "job": True, "summary": "A tiny job shipped by another package."} in json.loads(
        capsys.readouterr().out
    )


def test_an_entry_point_job_runs_from_the_cli_with_entry_point_probes(installed, capsys):
    assert cli.main(["run", "ep_faces", "--steps", "2", "--warmup", "0", "--observe-steps", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["workload"] == "ep_job" and result["metrics"]["plugin_steps"]["value"] == 2
    assert result["knob_sources"]["num_workers"] == "set by the user's code"


def test_run_import_module_from_the_working_tree(tmp_path, monkeypatch, capsys, isolated):
    (tmp_path / "my_jobs.py").write_text(PLUGIN + "\nperfsuite.register_job('mine', make)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    assert cli.main(["run", "mine", "--steps", "2", "--warmup", "0"]) == 2  # not imported: unknown
    assert "unknown workload 'mine'" in capsys.readouterr().err
    assert cli.main(["list", "--import", "my_jobs"]) == 0 and "mine" in capsys.readouterr().out
    assert cli.main(["run", "--import", "my_jobs", "mine", "--steps", "2", "--warmup", "0"]) == 0
    assert "ep_job at smoke scale (CPU-sized, seconds a run)" in capsys.readouterr().out
    # A knob typed on the command line that the job's DataLoader contradicts: one line saying what to write.
    assert cli.main(["run", "--import", "my_jobs", "mine", "--workers", "3", "--steps", "2"]) == 2
    assert "built with num_workers=0" in capsys.readouterr().err
    assert cli.main(["run", "--import", "no_such_module", "mine"]) == 2
    assert "--import no_such_module" in capsys.readouterr().err
