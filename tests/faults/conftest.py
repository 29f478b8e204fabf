"""Session fixtures for the fault tests: each reference and each fault runs at most once per session.

Statistical catches compare a fault's run with the unchanged run of the same
session, never with an absolute time, so both come from here. The runs on
several ranks (the ddp references, their faults, and a user's DDP job) share
one torchrun launch per test session: a launch costs seconds of start-up per
rank, and under pytest-xdist the first worker to ask makes it while the
others wait for its results (a lock file next to the session's temporary
directories).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from perfsuite.core.results import Result


def _cache_dir() -> Path | None:
    return Path(os.environ["PERFSUITE_CACHE"]) if os.environ.get("PERFSUITE_CACHE") else None


def _ddp_batch() -> dict[str, Result]:
    """Every run on several ranks the tests need, in one launch: the ddp references, each DDP fault, a user's job."""
    import dataclasses

    from perfsuite.harness.faults.catalog import FAULTS, REFERENCES
    from perfsuite.harness.ranks.launch import launch, rank_run
    from perfsuite.harness.runner import RunSpec
    from perfsuite.tools.catch import spec_for

    runs = {}
    for name, ref in REFERENCES.items():
        if ref.nproc > 1:
            runs[f"ref:{name}"] = rank_run(spec_for(ref, cache_dir=_cache_dir()))
    for name, fault in FAULTS.items():
        ref = REFERENCES[fault.reference]
        if ref.nproc > 1:
            spec = dataclasses.replace(spec_for(ref, fault=fault, cache_dir=_cache_dir()), mutate=None)
            runs[f"fault:{name}"] = rank_run(spec, (name,) if fault.mutation else ())
    from ddp_jobs import tiny_ddp_job

    runs["job:tiny_ddp"] = rank_run(RunSpec(tiny_ddp_job, steps=8, warmup=1, observe_steps=1))
    results = launch(list(runs.values()), 2)
    return dict(zip(runs, results))


@pytest.fixture(scope="session")
def ddp_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    """``{"ref:ddp": Result, "fault:<name>": Result, "job:tiny_ddp": Result, ...}``: the session's one launch."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run_id is None:  # no xdist: this process is the whole session
        return _ddp_batch()
    root = tmp_path_factory.getbasetemp().parent  # under xdist: shared by this session's workers only
    stored, lock = root / f"perfsuite-ddp-runs-{run_id}.json", root / f"perfsuite-ddp-runs-{run_id}.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if stored.is_file():
            return {k: Result.from_dict(v) for k, v in json.loads(stored.read_text(encoding="utf-8")).items()}
        results = _ddp_batch()
        tmp = stored.with_suffix(".tmp")
        tmp.write_text(json.dumps({k: r.to_dict() for k, r in results.items()}), encoding="utf-8")
        tmp.replace(stored)
        return results


@pytest.fixture(scope="session")
def runs(request: pytest.FixtureRequest) -> Callable[..., Result]:
    """``runs(reference, fault=None, again=0)``: the Result, run once per session and reused."""
    from perfsuite.harness.faults.catalog import REFERENCES
    from perfsuite.tools.catch import run_reference

    cache: dict[tuple[str, str | None, int], Result] = {}

    def get(reference: str, fault: str | None = None, again: int = 0) -> Result:
        if REFERENCES[reference].nproc > 1 and again == 0:
            batch = request.getfixturevalue("ddp_runs")
            return batch[f"fault:{fault}" if fault else f"ref:{reference}"]
        key = (reference, fault, again)
        if key not in cache:
            cache[key] = run_reference(reference, fault=fault, cache_dir=_cache_dir())
        return cache[key]

    return get


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use ``runs`` or ``ddp_runs`` train the reference workloads for real (bf16, torch.compile, worker
    processes, ranks): they are ``slow``, out of the ``pytest -m "not slow"`` inner loop and always in
    ``nox -s tests``."""
    here = Path(__file__).parent
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if ("runs" in fixtures or "ddp_runs" in fixtures) and here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.slow)
