"""A perf test that runs the DDP script unchanged (it calls init_process_group itself): doctor runs each run in a
fresh process, never its own (named explicitly, not collected: the file name does not start with test_)."""

from pathlib import Path

import perfsuite

SCRIPT = Path(__file__).with_name("train_ddp.py")


def test_ddp_script(perf_run):
    perf_run(perfsuite.Script([SCRIPT, "--epochs", "50"], num_classes=4), steps=4, warmup=1)
