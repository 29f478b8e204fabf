"""perf_run(..., nproc_per_node=N) end to end in the plugin, with the launcher replaced by a recorder.

The real launches are in tests/faults/test_ddp*.py; here the plugin's side: what it hands the launcher
(faults by name, the user's mutate), how markers judge the distributed metrics, and the ranks in the summary.
"""

from __future__ import annotations

import pytest
from perfsuite_pytester import run

pytest_plugins = ["pytester"]


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Replace the launcher: record each call, return a two-rank Result merged from hand-made rank reports."""
    from perfsuite.core.results import Fingerprint, Metric, Result
    from perfsuite.harness.ranks import launch as distributed
    from perfsuite.harness.ranks.merge import RankReport, merge
    from perfsuite.probes.ranks import PHASE_KEYS

    calls: list[dict] = []

    def report(rank: int, loader_ms: float) -> RankReport:
        metrics = {
            "samples_per_s": Metric("samples_per_s", 32.0, detail={"wall_s": 1.0, "samples": 32}),
            "step_ms": Metric("step_ms", 120.0),
            "data_wait_frac": Metric("data_wait_frac", 0.1),
        }
        samples = {"step_ms": [120.0] * 8, "data_wait": [0.1] * 8}
        result = Result("plugin_tiny", "smoke", {"num_workers": 0}, metrics, samples, Fingerprint.collect(), 4, 8, 1)
        phases = {key: [loader_ms if "loader" in key else 5.0] * 8 for key in PHASE_KEYS.values()}
        return RankReport(rank, result, phases, sync_forward=True, epoch_samples=4, dataset_len=8, pid=10 + rank)

    def fake_scaling(spec, nproc, rounds, **kw):
        calls.append({"spec": spec, "nproc": nproc, "rounds": rounds, **kw})
        return merge([report(0, 2.0), report(1, 102.0)], cores=2)

    monkeypatch.setattr(distributed, "scaling", fake_scaling)
    return calls


def test_perf_run_on_two_ranks_hands_faults_by_name_and_shows_each_rank(project, launched):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(max_straggler_wait_frac=0.5)
        def test_two_ranks(perf_run):
            result = perf_run("plugin_tiny", nproc_per_node=2, aug="none", num_workers=0)
            assert len(result.ranks) == 2
    """)
    out = run(project, "--perfsuite-inject", "set_epoch_missing", "--perfsuite-inject", "num_workers_0")
    out.assert_outcomes(failed=1)
    (call,) = launched
    assert call["nproc"] == 2 and call["rounds"] == 0
    assert call["faults"] == ["set_epoch_missing"]  # the code fault travels by name; num_workers_0 is in the knobs
    assert call["spec"].mutate is None and call["spec"].knobs.loader.num_workers == 0
    out.stdout.fnmatch_lines(
        [
            "*straggler rank: straggler_wait_frac * > 0.5*rank 1 arrives last in 8/8 steps*loader phase runs*",
            "*test_two_ranks*",
            "*2 ranks (OMP_NUM_THREADS=1)*",
            "*rank*pid*threads*workers*step p50 ms*",
        ]
    )


def test_probes_cannot_be_chosen_on_several_ranks(project, launched):
    project.makepyfile("""
        def test_two_ranks(perf_run):
            perf_run("plugin_tiny", nproc_per_node=2, probes=[])
    """)
    out = run(project)
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines(["*each rank runs every probe perfsuite has*"])
    assert launched == []
