"""perfsuite exec: users' training scripts run unchanged, their DataLoader's batches marking the steps.

Two scripts of different shapes, neither importing perfsuite: the guide's face-parsing
``train.py`` (a module-level ``main()`` calling ``train_step`` per batch, the loss read every
iteration) and ``tests/data/scripts/digits/train_digits.py`` (the loop inside ``main()`` with
argparse, an evaluation loader iterated every epoch, the loss read every iteration and the
predictions every ``--log-every`` iterations). Each sync is reported at the script's own line.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import torch

import perfsuite
from perfsuite import RunSpec, Script, ScriptError
from perfsuite.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
FACES = ROOT / "examples" / "own_pipeline"
DIGITS = ROOT / "tests" / "data" / "scripts" / "digits"


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def sites(result: perfsuite.Result) -> list[tuple[str, str, float, int | None]]:
    """(op, file:line, per step, period) of each sync site, files by name."""
    return sorted(
        (s["op"], s["site"].replace("\\", "/").rsplit("/", 1)[-1], s["per_step"], s.get("every"))
        for s in result.metric("syncs_per_step").detail["sites"]
    )


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sys.path.insert(0, str(FACES))
    try:
        import make_data

        return Path(make_data.write_dataset(tmp_path_factory.mktemp("faces"), count=12, size=32))
    finally:
        sys.path.remove(str(FACES))


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sys.path.insert(0, str(DIGITS))
    try:
        import digits_data

        return Path(digits_data.write_digits(tmp_path_factory.mktemp("digits")))
    finally:
        sys.path.remove(str(DIGITS))
        sys.modules.pop("digits_data", None)


def run_script(argv: list[str], steps: int = 4, **script: object) -> perfsuite.Result:
    spec = RunSpec(Script(argv, **script), steps=steps, warmup=1, observe_steps=1)  # type: ignore[arg-type]
    return perfsuite.run(spec)


@pytest.mark.slow
def test_exec_runs_the_guides_train_py_unchanged_with_its_sync_at_its_own_line(faces, tmp_path, capsys):
    out = tmp_path / "result.json"
    argv = ["exec", "--steps", "4", "--warmup", "1", "--observe-steps", "1", "--out", str(out), "--num-classes", "11"]
    command = ["python", str(FACES / "train.py"), "--data", str(faces), "--epochs", "12", "--workers", "0"]
    assert main([*argv, "--", *command]) == 0
    result = perfsuite.Result.from_json(out.read_text())
    assert sites(result) == [("Tensor.item", f"train.py:{line_of(FACES / 'train.py', 'loss.item()')}", 1.0, None)]
    assert result.workload == " ".join(command)  # named by the command that was run
    assert result.steps == 4 and result.batch_size == 4
    assert result.metric("samples_per_s").detail["samples"] == 4 * 4  # the window's own batches
    assert result.knobs["num_workers"] == 0 and result.knob_sources["num_workers"] == "set by the user's code"
    # Found by looking, not told: the model's input format, the loss module's targets.
    assert result.value("input_format") == "input float32 contiguous; params float32 contiguous"
    labels = result.metric("label_violations")
    assert labels.value == 0 and "CrossEntropyLoss" in labels.detail["checked"], labels
    assert "ignore_index 255" in labels.detail["checked"]  # read from the script's own loss module
    note = next(n for n in result.notes if n.startswith("perfsuite exec"))
    assert "model BiSeNet, optimizer SGD, loss CrossEntropyLoss" in note
    printed = " ".join(capsys.readouterr().out.split())  # the table folds to 80 columns when no terminal
    assert "epoch 0: loss" in printed and "sync site: Tensor.item (read) at" in printed  # the script, then ours
    # a hint in exec's own flags (issue 56 item 5: "declare target_samples_per_s", a flag exec did not have)
    assert "pass --target-samples-per-s R" in printed and "declare target_samples_per_s" not in printed
    assert main([*argv, "--", *command]) == 2  # --out exists: not overwritten unless asked
    assert "--overwrite" in capsys.readouterr().err


DIGITS_LINES = (
    "total += loss.item()",
    ".sum().item()",
    ".tolist()",
    "logits = model(images.to(args.device))",
    "loss = criterion(logits, labels.to(args.device))",
    "predicted = model(images.to(device))",
    "correct += (predicted == labels.to(device))",
)


def test_a_second_shape_loop_in_main_eval_every_epoch_periodic_reads(digits):
    script = DIGITS / "train_digits.py"
    result = run_script([str(script), "--data", str(digits), "--epochs", "12", "--workers", "2"])
    # 8 batches per epoch: evaluation's two reads once per epoch; predictions read every 10 iterations; and the
    # copies of pageable batches with non_blocking=False (blocking copies on CUDA): training's every step,
    # evaluation's once per epoch.
    at = {text: f"train_digits.py:{line_of(script, text)}" for text in DIGITS_LINES}
    assert sites(result) == sorted(
        [
            ("Tensor.item", at["total += loss.item()"], 1.0, None),
            ("Tensor.item", at[".sum().item()"], 0.25, 8),
            ("Tensor.tolist", at[".tolist()"], 0.1, 10),
            ("Tensor.to", at["logits = model(images.to(args.device))"], 1.0, None),
            ("Tensor.to", at["loss = criterion(logits, labels.to(args.device))"], 1.0, None),
            ("Tensor.to", at["predicted = model(images.to(device))"], 0.25, 8),
            ("Tensor.to", at["correct += (predicted == labels.to(device))"], 0.25, 8),
        ]
    )
    assert result.value("syncs_per_step") == pytest.approx(3.85)
    assert result.metric("syncs_per_step").detail["kinds"] == pytest.approx({"blocking copy": 2.5, "read": 1.35})
    assert result.knobs["num_workers"] == 2  # the training loader, not the evaluation one
    assert "1 other DataLoader(s) iterated, left alone" in next(
        n for n in result.notes if n.startswith("perfsuite exec")
    )


@pytest.mark.parametrize("steps", [20, 22, 37])
def test_a_read_every_10_steps_is_0_1_per_step_whatever_steps_is(digits, steps):
    script = DIGITS / "train_digits.py"
    result = run_script([str(script), "--data", str(digits), "--epochs", "20", "--workers", "0"], steps=steps)
    tolist = [s for s in result.metric("syncs_per_step").detail["sites"] if s["op"] == "Tensor.tolist"]
    assert [(s["per_step"], s["every"], s["seen"]) for s in tolist] == [(0.1, 10, "every 10 steps")]


@pytest.mark.slow
def test_loader_picks_the_training_loader_by_its_datasets_class_and_ordinal(digits):
    script = DIGITS / "train_digits.py"
    argv = [str(script), "--data", str(digits), "--epochs", "20", "--workers", "2"]
    evaluation = run_script(argv, loader="DigitFolder#2", steps=3)  # the evaluation loader marks the steps
    assert ("Tensor.item", f"train_digits.py:{line_of(script, '.sum().item()')}", 1.0, None) in sites(evaluation)
    assert evaluation.knobs["num_workers"] == 0  # the evaluation loader's, not the training loader's 2
    with pytest.raises(ScriptError, match=r"matched none of the DataLoaders .* \(DataLoader over DigitFolder"):
        run_script(argv, loader="FaceParsingDataset")


def test_a_module_run_with_dash_m(digits, monkeypatch):
    monkeypatch.chdir(DIGITS)
    result = run_script(["python", "-m", "train_digits", "--data", str(digits), "--epochs", "12", "--workers", "0"])
    assert result.workload == "train_digits" and result.value("syncs_per_step") == pytest.approx(3.85)


SCRIPTS = {
    "no_loader": "import torch\nx = torch.ones(3)\nfor _ in range(5):\n    x = x * 2\n",
    "short": (
        "import torch\nloader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4)\n"
        "model = torch.nn.Linear(2, 1)\nfor b in loader:\n    model(b).sum().backward()\n"
    ),
    "raises": (
        "import torch\n\ndef broken(batch):\n    raise ValueError('bad batch ' + str(tuple(batch.shape)))\n\n"
        "for b in torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4):\n    broken(b)\n"
    ),
    "exits": (
        "import sys, torch\nfor b in torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4):\n    sys.exit(3)\n"
    ),
}


def write(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(SCRIPTS[name])
    return path


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("no_loader", "ended without iterating a torch DataLoader"),
        (
            "short",
            "ended after 2 training batch(es) (1 epoch(s)), in the window phase, before the measured window ended; ",
        ),
        ("raises", "raised ValueError: bad batch (4, 2)"),
        ("exits", "exited with status 3 after 1 training batch"),
    ],
)
def test_bad_scripts_get_a_clear_error(tmp_path, name, words):
    with pytest.raises(ScriptError, match=re.escape(words)):
        run_script([str(write(tmp_path, name))])


def test_the_cli_shows_the_scripts_own_traceback_and_exits_2(tmp_path, capsys):
    path = write(tmp_path, "raises")
    assert main(["exec", "--steps", "2", "--", "python", str(path)]) == 2
    err = capsys.readouterr().err
    assert f'File "{path}", line 4, in broken' in err and "ValueError: bad batch (4, 2)" in err
    assert os.path.dirname(perfsuite.__file__) not in err.split("perfsuite: error:")[0]  # the script's frames only
    assert "perfsuite: error:" in err and "raised ValueError" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["exec", "--"], "no command to run"),
        (["exec", "--", "python", "no_such_train.py"], "no file 'no_such_train.py'"),
        (["exec", "--", "python", "-u", "train.py"], "python's own option '-u'"),
        (["exec", "--loader", "Bad Name", "--", "python", __file__], "name the training DataLoader"),
    ],
)
def test_bad_command_lines_exit_2_with_what_to_write(argv, words, capsys):
    assert main(argv) == 2
    assert words in capsys.readouterr().err


CLEAN = """
import sys, torch
stack = []
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(8, 2)
try:
    for epoch in range(100):
        for batch in torch.utils.data.DataLoader(data, batch_size=4):  # a new loader each epoch, one dataset
            stack.append((torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()))
            loss = model(batch).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
finally:
    sys.modules["__exec_probe__"] = stack  # the finally block runs: the script was stopped cleanly
"""


def test_the_window_runs_without_modes_and_the_script_stops_cleanly(tmp_path):
    path = tmp_path / "clean.py"
    path.write_text(CLEAN)
    before = torch.utils.data.DataLoader.__iter__
    result = perfsuite.run(RunSpec(Script([str(path)]), steps=3, warmup=2, observe_steps=2, period_steps=0))
    stack = sys.modules.pop("__exec_probe__")
    assert stack[:5] == [(0, 0)] * 5  # warm-up and window: nothing instrumented (batches 0-4)
    # no speed of light (extra steps through the script's loop would change what it computes): 2 observed steps
    assert all(depth != (0, 0) for depth in stack[5:]) and len(stack) == 7
    eff = result.metric("input_efficiency")
    assert result.samples["sol_step_ms"] == [] and not eff.available and "not run for a script" in (eff.reason or "")
    assert result.script is not None and (result.script.batches, result.script.epochs) == (7, 4)
    assert torch.utils.data.DataLoader.__iter__ is before  # the hook is gone


def test_exec_judges_the_loader_headroom_against_the_declared_rate(tmp_path, capsys):
    path = tmp_path / "clean.py"
    path.write_text(CLEAN)
    argv = ["exec", "--steps", "2", "--warmup", "1", "--target-samples-per-s", "5", "--json", "--", "python"]
    assert main([*argv, str(path)]) == 0
    headroom = perfsuite.Result.from_json(capsys.readouterr().out).metric("loader_headroom")
    assert headroom.available and headroom.detail["feeds"] is True, headroom
    assert "declared target_samples_per_s=5" in str(headroom.detail), headroom.detail


def test_a_script_cannot_take_knobs_or_mutations(tmp_path):
    path = write(tmp_path, "short")
    with pytest.raises(ScriptError, match="builds its own DataLoader"):
        perfsuite.run(RunSpec(Script([str(path)]), job_knobs={"num_workers": 2}))


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"argv": []}, "list of strings"),
        ({"argv": "train.py"}, "list of strings"),
        ({"argv": ["python"]}, "name the training script"),
        ({"argv": ["-m"]}, "name the module"),
        ({"argv": [__file__], "loader": "0"}, "name the training DataLoader"),
        ({"argv": [__file__], "target_kind": "box"}, "write one of"),
        ({"argv": [__file__], "num_classes": 0}, "positive integer"),
        ({"argv": [__file__], "num_classes": 4, "flip_pairs": [(1, 9)]}, "not a class"),
    ],
    ids=["empty", "string", "python-only", "dash-m-only", "loader-0", "target-kind", "classes", "flip-pairs"],
)
def test_script_refuses_what_it_cannot_run(kwargs, words):
    with pytest.raises(perfsuite.JobError, match=words):
        Script(**kwargs)  # type: ignore[arg-type]


def test_the_result_reads_back_and_its_modules_are_forgotten(digits):
    script = DIGITS / "train_digits.py"
    result = run_script([str(script), "--data", str(digits), "--epochs", "12", "--workers", "0"])
    assert (
        perfsuite.Result.from_json(result.to_json()).metric("syncs_per_step").detail
        == json.loads(result.to_json())["metrics"]["syncs_per_step"]["detail"]
    )
    assert "digits_data" not in sys.modules and str(DIGITS) not in sys.path


def test_the_model_optimizer_scaler_and_loss_are_found_among_the_scripts_objects():
    from perfsuite.harness.script.drive import find_objects

    class Trainer:
        def __init__(self):
            self.model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
            self.ema = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))  # not trained: not the model
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
            self.scaler = torch.amp.GradScaler("cpu")
            self.losses = {"seg": torch.nn.CrossEntropyLoss(), "aux": torch.nn.MSELoss()}

    def loop_frame(trainer):  # a frame holding the trainer, as the script's loop does
        return sys._getframe()

    trainer = Trainer()
    found = find_objects([loop_frame(trainer)])
    assert found.model is trainer.model and found.optimizer is trainer.optimizer and found.scaler is trainer.scaler
    assert found.criterion is None and {type(m).__name__ for m in found.losses} == {"CrossEntropyLoss", "MSELoss"}
    assert "name it with --criterion" in found.describe()
    assert find_objects([loop_frame(trainer)], "MSELoss").criterion is trainer.losses["aux"]
