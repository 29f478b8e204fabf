"""A user's own training job (examples/own_pipeline) under perfsuite: its sync site, its loader, its targets.

The example's modules are the user's code (they do not import perfsuite);
perf_jobs.py is the glue. These run the job through perfsuite.run with every
probe and check what the issue asks: the per-iteration loss.item() is one sync
per step at train.py's own line, data wait and samples/s come from the user's
loader, the label probe checks the targets the step passes to its loss, and
bad input gets an error saying what to write.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import perfsuite
from perfsuite import JobError, Knobs, RunSpec, run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_pipeline"
ITEM_LINE = next(
    i for i, line in enumerate((EXAMPLE / "train.py").read_text().splitlines(), 1) if "loss.item()" in line
)


@pytest.fixture(scope="module")
def example():
    sys.path.insert(0, str(EXAMPLE))
    try:
        import make_data
        import perf_jobs

        yield perf_jobs, make_data
    finally:
        sys.path.remove(str(EXAMPLE))


@pytest.fixture(scope="module")
def faces(example, tmp_path_factory):
    return example[1].write_dataset(tmp_path_factory.mktemp("faces"), count=8, size=32)


def _run(job, steps=3, **job_knobs):
    return run(RunSpec(job, steps=steps, warmup=1, observe_steps=2, job_knobs=job_knobs, period_steps=0))


@pytest.mark.slow
def test_user_step_shows_its_own_sync_site_and_loader(example, faces):
    result = _run(example[0].face_job(faces, "cpu", "cpu", workers=2), steps=4)
    sites = result.metric("syncs_per_step").detail["sites"]
    assert result.value("syncs_per_step") == 1
    assert [(s["op"], s["site"].replace("\\", "/").split("/")[-1], s["per_step"]) for s in sites] == [
        ("Tensor.item", f"train.py:{ITEM_LINE}", 1.0)
    ]
    # Measured on the user's own DataLoader: its knobs, read back, marked as the user's.
    assert result.metric("data_wait_frac").available and result.value("samples_per_s") > 0
    assert result.metric("samples_per_s").detail["samples"] == 4 * 4 and result.batch_size == 4
    assert result.knobs["num_workers"] == 2 and result.knobs["drop_last"] is True and result.knobs["aug"] == "cpu"
    assert result.knob_sources["num_workers"] == "set by the user's code"
    assert "amp" not in result.knobs and result.knob_sources["amp"].startswith("not applied")
    assert perfsuite.Result.from_json(result.to_json()).knob_sources == result.knob_sources


@pytest.mark.slow
def test_label_probe_checks_the_users_targets(example, faces):
    ok = _run(example[0].face_job(faces, "cpu", "gpu", workers=0))
    labels = ok.metric("label_violations")
    assert labels.value == 0 and labels.detail["observed_steps"] == 2
    assert "CrossEntropyLoss" in labels.detail["checked"]
    # Declare fewer classes than the masks hold: the same probe now finds them.
    job = example[0].face_job(faces, "cpu", "cpu", workers=0)
    job.num_classes = 4
    bad = _run(job).metric("label_violations")
    assert bad.value > 0 and bad.detail["out_of_set"] == bad.value


@pytest.mark.slow
def test_no_criterion_means_unavailable_never_zero(example, faces):
    job = example[0].face_job(faces, "cpu", "cpu", workers=0)
    job.criterion = None
    metric = _run(job).metric("label_violations")
    assert not metric.available and "criterion" in metric.reason


@pytest.mark.slow
def test_a_step_that_never_calls_the_criterion_is_unchecked(example, faces):
    job = example[0].face_job(faces, "cpu", "cpu", workers=0)
    job.criterion = torch.nn.CrossEntropyLoss()  # declared, but the step calls its own
    metric = _run(job).metric("label_violations")
    assert not metric.available and "never called" in metric.reason


def _tiny(step=None, loader=None, model=None, **kw):
    model = model if model is not None else torch.nn.Linear(2, 1)
    loader = loader if loader is not None else torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4)
    return perfsuite.Job(step=step or (lambda b: model(b).pow(2).mean()), loader=loader, model=model, **kw)


@pytest.mark.parametrize(
    "step, words",
    [
        (lambda b: 1.5, "not loss.item()"),
        (lambda b: None, "return loss"),
        (lambda b: torch.ones(3, requires_grad=True), "scalar"),
    ],
)
def test_a_step_must_return_its_loss_tensor(step, words):
    with pytest.raises(JobError, match=words):
        _run(_tiny(step=step))


def test_an_empty_loader_says_why():
    with pytest.raises(JobError, match="0 samples"):
        _run(_tiny(loader=torch.utils.data.DataLoader([], batch_size=2)))
    with pytest.raises(JobError, match="drop_last=False"):
        _run(_tiny(loader=torch.utils.data.DataLoader(torch.randn(3, 2), batch_size=4, drop_last=True)))


def test_a_model_on_another_device_is_refused():
    with pytest.raises(JobError, match=r"model.to\('cpu'\)"):
        _run(_tiny(model=torch.nn.Linear(2, 1, device="meta"), device="cpu"))


def test_knobs_the_users_loader_contradicts_are_refused():
    with pytest.raises(JobError, match="built with num_workers=0"):
        _run(_tiny(), num_workers=4)
    with pytest.raises(JobError, match="does not change a user's step"):
        _run(_tiny(), amp="bf16")
    assert _run(_tiny(), batch_size=4).knobs["batch_size"] == 4  # agreeing is fine


def test_a_dataset_job_gets_its_loader_knobs_applied_by_perfsuite():
    model = torch.nn.Linear(2, 1)
    job = perfsuite.Job(
        step=lambda b: model(b).pow(2).mean(), dataset=torch.randn(8, 2), model=model, loader_kwargs={"batch_size": 2}
    )
    result = _run(job, drop_last=True)
    assert result.knobs["drop_last"] is True and result.knob_sources["drop_last"] == "set by perfsuite"
    assert result.knob_sources["batch_size"] == "set by the user's code"
    assert result.knob_sources["pin_memory"].startswith("torch default")


def test_the_contract_refuses_what_it_cannot_run():
    with pytest.raises(JobError, match="exactly one"):
        perfsuite.Job(step=lambda b: b)
    with pytest.raises(JobError, match="LossHook"):
        _tiny(criterion=torch.nn.functional.cross_entropy)
    assert isinstance(perfsuite.LossHook(torch.nn.functional.mse_loss), torch.nn.Module)


def test_reference_workloads_run_through_the_same_contract():
    from perfsuite.harness.pipeline import build_pipeline
    from perfsuite.jobs.registry import get_workload

    w = get_workload("gray_classifier")
    job = build_pipeline(w, w.scale("smoke"), Knobs.from_flat(num_workers=0)).as_job()
    assert isinstance(job, perfsuite.Job) and job.pipeline is not None
    result = run(
        RunSpec(
            "gray_classifier", knobs=Knobs.from_flat(num_workers=0, aug="none"), steps=2, warmup=0, observe_steps=0
        ),
        probes=[],
    )
    assert result.knob_sources == {} and result.knobs["num_workers"] == 0


class FlipSwap(torch.nn.Module):
    """A batched horizontal flip that swaps the left/right labels 3 and 4 on the samples it flips (``swap=False``:
    forgets to)."""

    def __init__(self, swap: bool = True) -> None:
        super().__init__()
        self.swap = swap

    def forward(self, images, masks):
        n = images.shape[0]
        flip = torch.rand(n, device=images.device) < 0.5
        images = torch.where(flip.view(n, 1, 1, 1), images.flip(-1), images)
        flipped = masks.flip(-1)
        if self.swap:
            flipped = torch.where(flipped == 3, 4, torch.where(flipped == 4, 3, flipped))
        return images, torch.where(flip.view(n, 1, 1), flipped, masks)


def _faces_job(transform, **declared):
    """Eyes left (3) and right (4), a nose (1): a segmentation step through ``transform``, then its loss."""
    masks = torch.zeros(8, 16, 16, dtype=torch.long)
    masks[:, 4:8, 1:6], masks[:, 4:8, 10:15], masks[:, 9:14, 6:10] = 3, 4, 1
    data = torch.utils.data.TensorDataset(torch.rand(8, 3, 16, 16), masks)
    model = torch.nn.Conv2d(3, 5, 3, padding=1)
    criterion = torch.nn.CrossEntropyLoss()

    def step(batch):
        images, target = transform(*batch)
        return criterion(model(images), target)

    loader = torch.utils.data.DataLoader(data, batch_size=4)
    return perfsuite.Job(
        step, model, loader=loader, criterion=criterion, num_classes=5, aug="gpu", gpu_transform=transform, **declared
    )


def test_declared_flip_pairs_reach_the_label_probes_property_check():
    def violations(job):
        metric = _run(job).metric("label_violations")
        return metric.value, " ".join(metric.detail["examples"])

    assert violations(_faces_job(FlipSwap(swap=True), flip_pairs=[(3, 4)])) == (0, "")
    count, examples = violations(_faces_job(FlipSwap(swap=False), flip_pairs=[(3, 4)]))
    assert count > 0 and "the flip forgot the label swap" in examples
    assert violations(_faces_job(FlipSwap(swap=False)))[0] == 0  # without the pairs, a forgotten swap is unseen


@pytest.mark.parametrize(
    ("pairs", "words"),
    [
        ([(3, 3)], "paired with itself"),
        ([(3, 4), (4, 1)], "more than one pair"),
        ([(3, 9)], "not a class"),
        ([3, 4], "not a pair of labels"),
    ],
)
def test_flip_pairs_are_checked_on_construction(pairs, words):
    with pytest.raises(JobError, match=words):
        _faces_job(FlipSwap(), flip_pairs=pairs)


def test_pin_memory_on_a_cpu_run_gets_a_note(recwarn):
    loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4, pin_memory=True)
    notes = _run(_tiny(loader=loader)).notes
    assert any(n.startswith("pin_memory=True on a CPU run: without CUDA torch does not pin") for n in notes)
    assert not any("pin_memory" in n for n in _run(_tiny()).notes)
