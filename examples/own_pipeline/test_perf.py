"""Perf tests of the face-parsing training job: CPU vs GPU augmentation, same probes, same thresholds."""

import pytest
from perf_jobs import face_job


@pytest.mark.perf(max_syncs_per_step=1, max_label_violations=0)  # the per-iteration loss.item(), nothing more
@pytest.mark.parametrize("aug", ["cpu", "gpu"])
def test_face_training(perf_run, face_data, aug):
    perf_run(face_job(face_data, perf_run.device, aug), steps=6, warmup=2)
