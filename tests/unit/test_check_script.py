"""``perfsuite check -- python train.py ARGS`` end to end, on examples/own_pipeline and copies of it whose
training transform carries one planted fault (tests/unit/pipeline_copies.py). Subprocesses: slow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.pipeline_copies import EXAMPLE, copy_example

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
LABELS = "[tool.perfsuite.labels]\nnum_classes = 11\nflip_pairs = [[3, 4]]\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("faces")
    subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), str(out), "--count", "6"], check=True)
    return out


@pytest.fixture(scope="module")
def data256(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same faces at 256 px, for copies that train at 128: the resize halves them, and the face's parts are
    large enough at 128 for the sub-pixel fit (at 64 too few are)."""
    out = tmp_path_factory.mktemp("faces256")
    command = [sys.executable, str(EXAMPLE / "make_data.py"), str(out), "--count", "6", "--size", "256"]
    subprocess.run(command, check=True)
    return out


def check(train: Path, data: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "perfsuite.cli", "check", "--samples", "6", *flags, "--"]
    command += ["python", str(train), "--data", str(data), "--workers", "0"]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=train.parent, timeout=300)


def test_the_example_passes(data: Path) -> None:
    done = check(EXAMPLE / "train.py", data, "--num-classes", "11")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed python" in done.stdout and "transform({'image': PIL RGB 64x64, 'mask': PIL L 64x64})" in done.stdout
    assert "ignore index 255 (the loss module's)" in done.stdout


def test_a_flip_without_the_swap_exits_1_naming_it(tmp_path: Path, data: Path) -> None:
    train = copy_example(tmp_path, None, pyproject=LABELS)  # the example's flip, with left/right eyes declared
    done = check(train, data)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cause: missing swap" in done.stdout and "the flip forgot the label swap" in done.stdout
    assert "[tool.perfsuite.labels]" in done.stderr


def test_the_same_labels_with_a_swapping_flip_pass(tmp_path: Path, data: Path) -> None:
    done = check(copy_example(tmp_path, "swapping_flip", pyproject=LABELS), data)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_erase_to_a_real_class_exits_1_naming_it(tmp_path: Path, data: Path) -> None:
    done = check(copy_example(tmp_path, "erase_to_class"), data, "--num-classes", "11")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cause: erase" in done.stdout and "erased pixels are not class 0" in done.stdout


def test_without_a_class_count_it_exits_2(data: Path) -> None:
    done = check(EXAMPLE / "train.py", data)
    assert done.returncode == 2 and "--num-classes N" in done.stderr


def test_a_torch_resize_with_one_align_corners_passes(tmp_path: Path, data256: Path) -> None:
    """The control for the next test: the same tensor resize (256 -> 128), image and mask on one pixel grid."""
    done = check(copy_example(tmp_path, "torch_resize", image_size=128), data256, "--num-classes", "11")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed       alignment, strict and sub-pixel" in done.stdout


def test_a_mask_resized_with_another_align_corners_exits_1(tmp_path: Path, data256: Path) -> None:
    done = check(copy_example(tmp_path, "align_corners", image_size=128), data256, "--num-classes", "11")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cause: subpixel" in done.stdout and "resampled on different pixel grids" in done.stdout


def test_the_check_runs_from_a_perf_test(data: Path) -> None:
    import perfsuite
    from perfsuite.testing import check_script_transform

    script = perfsuite.Script([EXAMPLE / "train.py", "--data", data, "--workers", "0"], num_classes=11)
    report = check_script_transform(script, samples=4, seeds=2)
    assert report.indices == [0, 2, 3, 5] and len(report.passes) >= 1
    with pytest.raises(perfsuite.errors.PropertyViolation) as info:
        check_script_transform(
            perfsuite.Script([EXAMPLE / "train.py", "--data", data], num_classes=11, flip_pairs=[(3, 4)]), seeds=2
        )
    assert info.value.cause == "missing swap"


def test_a_transform_it_cannot_adapt_exits_2_naming_the_call_found(tmp_path: Path, data: Path) -> None:
    done = check(copy_example(tmp_path, "three_images"), data, "--num-classes", "11")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "transform(dict {'image', 'edges', 'mask'})" in done.stderr and "write an adapter" in done.stderr


# -- a face-parsing repository as published (tests/unit/face_repo_script.py): its transform found by what it does --


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.unit.face_repo_script import write_data

    return write_data(tmp_path_factory.mktemp("celeba"))


def check_repo(train: Path, data: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "perfsuite.cli", "check", "--samples", "3", "--num-classes", "19", *flags, "--"]
    command += ["python", str(train), "--data", str(data)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=train.parent, timeout=300)


@pytest.mark.parametrize("placement", ["attribute", "function"])
def test_a_repository_flip_without_the_swap_exits_1_at_its_line_and_the_fixed_one_passes(
    tmp_path: Path, faces: Path, placement: str
) -> None:
    """self.trans_train(dict(im=, lb=)), or a module-level function called in __getitem__: no name perfsuite knows."""
    from tests.unit.face_repo_script import PAIRS_FLAG, flip_line, write_repo

    train = write_repo(tmp_path / "broken", swap=False, placement=placement)
    done = check_repo(train, faces, "--flip-pairs", PAIRS_FLAG)
    assert done.returncode == 1, done.stdout + done.stderr
    line = flip_line(train.parent)
    expected = f"cause: missing swap: flip without the left/right swap of 2:3, 4:5, 7:8 at transform.py:{line} "
    assert expected + "(HorizontalFlip.__call__)" in done.stdout, done.stdout
    done = check_repo(write_repo(tmp_path / "fixed", swap=True, placement=placement), faces, "--flip-pairs", PAIRS_FLAG)
    assert done.returncode == 0, done.stdout + done.stderr
    chosen = "FaceMask.trans_train (Compose.__call__)" if placement == "attribute" else "face_dataset:train_augment"
    assert f"transform    {chosen}, defined at " in done.stdout, done.stdout


def test_exec_refuses_flip_pairs_on_the_broken_repository(tmp_path: Path, faces: Path, capsys) -> None:
    """Never accepted and ignored: exec's batches cannot show a missing swap, so the flag is refused, naming the
    perfsuite check command that tests it."""
    from perfsuite.cli.main import main
    from tests.unit.face_repo_script import PAIRS_FLAG, write_repo

    train = write_repo(tmp_path / "broken", swap=False)
    argv = ["exec", "--num-classes", "19", "--flip-pairs", PAIRS_FLAG, "--", "python", str(train), "--data", str(faces)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "perfsuite exec does not check left/right swaps" in err
    assert f"run perfsuite check --num-classes 19 --flip-pairs {PAIRS_FLAG} -- python {train}" in err
