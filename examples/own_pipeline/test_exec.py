"""The training script itself under perfsuite, unchanged: no glue beyond its command line."""

from pathlib import Path

import pytest

import perfsuite

TRAIN = Path(__file__).with_name("train.py")


@pytest.mark.perf(max_syncs_per_step=1)  # train.py's per-iteration loss.item(), nothing more
def test_train_script(perf_run, face_data):
    perf_run(perfsuite.Script([TRAIN, "--data", face_data, "--epochs", "12", "--workers", "0"]), steps=4, warmup=1)
