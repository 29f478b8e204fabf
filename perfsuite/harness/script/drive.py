"""Run a user's training script unchanged, its training DataLoader's batches marking the steps (``perfsuite exec``).

The script runs in this process, as ``python train.py ARGS`` would run it
(``sys.argv`` set, its directory first on ``sys.path``, ``__name__ ==
"__main__"``). While it runs, ``DataLoader.__iter__`` hands the *training*
loader's iterator out wrapped (the loader the script iterates first, or the
one ``Script(loader=...)`` names; every other loader is left alone). Each batch
that iterator yields is a step boundary: the step is everything the script does
from one batch to the next (forward, backward, logging, the evaluation at an
epoch's end). The script's loop thus calls the run's one driver
(:mod:`perfsuite.harness.driver`) at each boundary, as a Job's loop does: the
same phases (warm-up, window, the probes' after-window work such as the loader
ledger's replay, period scan, observed steps), the same probes, the same stream.
A script gets no speed of light: extra steps could only run through its own
loop body, which nothing can undo (:mod:`perfsuite.harness.state`); every step
it takes is one a plain run takes too, on the same batches, so what it computes
and saves is what ``python train.py`` computes and saves up to the batch where
perfsuite stops it (recorded as the Result's :class:`perfsuite.core.results.ScriptStop`).
What is a script's own is here:

1. which DataLoader is the training one (``DataLoader.__iter__`` is hooked on
   the class while the script runs);
2. at the first batch, the script's model, optimizer, GradScaler and loss
   module found among the objects its frames hold (no argument names them);
3. stopping the script once the run has its steps: the wrapped iterator raises
   :class:`perfsuite.harness.driver.Stop` (derived from BaseException), so the
   script's ``finally`` blocks run, its ``except Exception`` handlers do not
   swallow it, and its DataLoader workers shut down.

A batch request that ends an epoch (StopIteration) is not a boundary: the step
goes on through what the script does between epochs, up to the next batch.
The Result is assembled as any other run's (:func:`perfsuite.harness.runner.assemble_result`),
with call sites in the script's own files. A script that raises, exits with a
failure status, ends before the run's steps, or never iterates a DataLoader
gets a :class:`perfsuite.errors.ScriptError` saying so (with the script's own
traceback, perfsuite's frames left out).
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import sys
import time
import traceback
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core.knobs import Knobs
from perfsuite.core.results import ScriptStop
from perfsuite.core.source_paths import anchored_at
from perfsuite.core.user_frames import PERFSUITE_DIR
from perfsuite.errors import PerfsuiteError, RunTimeout, ScriptError
from perfsuite.harness import workers
from perfsuite.harness.driver import DONE, SETUP, Driver, Recorded, Stop
from perfsuite.harness.observation import period_steps_for
from perfsuite.harness.script.modules import own_modules
from perfsuite.harness.script.objects import Found, LossPick, find_objects, ignore_index_of
from perfsuite.harness.state import SCRIPT_NO_SOL
from perfsuite.harness.threads import fit_threads
from perfsuite.harness.watchdog import Watchdog
from perfsuite.harness.worker_death import WorkerDeath, signal_name, worker_death
from perfsuite.jobs.script import EXEC_NOTE, LoaderChoice, Script
from perfsuite.probes.base import Probe, RunContext

_PACKAGE = PERFSUITE_DIR + os.sep  # the package, wherever it lies


def _script_frames(frame: Any) -> list[Any]:
    """The frames of the script's own call stack, from the innermost up to (not including) runpy."""
    out = []
    while frame is not None:
        path = frame.f_code.co_filename
        if is_runpy(path):
            break
        if not path.startswith(_PACKAGE):
            out.append(frame)
        frame = frame.f_back
    return out


class _Marked:
    """The training loader's iterator, as the script sees it: each batch it yields is a step boundary."""

    def __init__(self, it: Any, source: _ScriptSource) -> None:
        self._it, self._source = it, source

    def __iter__(self) -> _Marked:
        return self

    def __next__(self) -> Any:
        return self._source.next_batch(self._it)

    def __len__(self) -> int:
        return len(self._it)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)


class _ScriptSource:
    """A script's step boundaries for :class:`perfsuite.harness.driver.Driver`: its training DataLoader.

    Finds the training loader among those the script iterates (``DataLoader.__iter__``, :meth:`wrap`), and at
    the first boundary the objects the probes hook (:func:`find_objects`). ``_it`` is the iterator the script
    holds now (the loader probe and the watchdog read its worker processes there).
    """

    boundary_before_fetch = False  # a request may end an epoch: the step then goes on (perfsuite.harness.driver)

    def __init__(self, script: Script, spec: Any) -> None:
        self.script, self.spec = script, spec
        self.choice: LoaderChoice = script.choice
        self.loaders: list[Any] = []  # every DataLoader the script iterated, in order (identity)
        self.training: Any = None
        self.epochs = 0
        self._it: Any = None
        self._made: tuple[float, float] | None = None  # making this epoch's iterator: wall s, CPU s
        self.error: BaseException | None = None  # perfsuite's own failure while the script ran
        self.failed_in = ""  # the phase it happened in
        self.found = Found()
        self.driver: Driver | None = None
        self._pick: LossPick | None = None  # several candidate loss modules: chosen over the warm-up
        self._bound: Any = None
        self._ctx: RunContext | None = None
        self._iterators: list[weakref.ref[Any]] = []  # every DataLoader iterator the script made (close stops them)

    # -- the loader hook ------------------------------------------------------------------------------------

    def wrap(self, loader: Any, make: Any) -> Any:
        """``DataLoader.__iter__`` while the script runs: the training loader's iterator comes back marked."""
        if self.training is None and self._phase() == SETUP and any(known is loader for known in self.loaders):
            self.error = _no_chosen_loader(self, loader)  # an epoch has gone by without it: stop the script now
            raise Stop
        if not any(known is loader for known in self.loaders):
            if self._same_as_training(loader):
                self.training = loader  # the script builds its loader again (each epoch): still the training one
            else:
                self.loaders.append(loader)
                if self.training is None and self._phase() == SETUP and self._chosen(loader):
                    self.training = loader
        if loader is not self.training:
            return self._made_iterator(make())
        if self._phase() == DONE:  # the script caught the stop and iterates again: stop it again, start no workers
            return _Marked(iter(()), self)
        t0, c0 = time.perf_counter(), time.thread_time()
        it = self._made_iterator(make())
        self._made = (time.perf_counter() - t0, time.thread_time() - c0)
        self.epochs += 1
        return _Marked(it, self)

    def _made_iterator(self, it: Any) -> Any:
        with contextlib.suppress(TypeError):  # an iterator that takes no weak reference has no workers to stop
            self._iterators.append(weakref.ref(it))
        return it

    def _phase(self) -> str:
        return self.driver.phase if self.driver is not None else SETUP

    def _same_as_training(self, loader: Any) -> bool:
        """A new DataLoader over the training loader's own dataset object: the same training loader, re-built."""
        dataset = getattr(self.training, "dataset", None)
        return dataset is not None and getattr(loader, "dataset", None) is dataset

    def _chosen(self, loader: Any) -> bool:
        matching = [known for known in self.loaders if self.choice.matches(known)]
        return len(matching) == self.choice.nth and matching[-1] is loader

    def next_batch(self, it: Any) -> Any:
        """The script asks its training loader for a batch: the driver's boundary. perfsuite's own failure ends
        the script (reported as perfsuite's, not the script's)."""
        assert self.driver is not None
        if self.driver.phase == DONE:
            raise Stop
        self._it = it
        try:
            return self.driver.next_batch()
        except (Stop, StopIteration, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - perfsuite's own failure (the batch's fetch is the loader's)
            self.failed_in = self.driver.phase
            self.error, self.driver.phase = exc, DONE
            raise Stop from None

    # -- the StepSource protocol ------------------------------------------------------------------------------

    def fetch(self) -> Any:
        return next(self._it)

    def epoch_start(self) -> tuple[float, float] | None:
        made, self._made = self._made, None
        return made

    def direct_step(self) -> None:
        return None  # the step is the script's own loop body: no speed of light (perfsuite.harness.state)

    def state_objects(self) -> list[Any]:
        return []

    def setup(self) -> tuple[Any, RunContext]:
        """The first batch: find what the probes hook and bind the job."""
        from perfsuite.jobs.contract import Job, bind
        from perfsuite.jobs.workload import Scale

        self.found = find_objects(_script_frames(sys._getframe(1)), self.script.criterion)
        criterion = self.found.criterion
        if criterion is None and len(self.found.losses) > 1:
            self._pick = LossPick(self.found, named=self.script.criterion is not None)
        ignore = self.script.ignore_index
        if ignore is None and criterion is not None:
            ignore = ignore_index_of(criterion)
        job = Job(
            step=_not_called,
            loader=self.training,
            model=self.found.model,
            optimizer=self.found.optimizer,
            criterion=criterion,
            num_classes=self.script.num_classes,
            ignore_index=ignore,
            target_kind=self.script.target_kind,
            flip_pairs=self.script.flip_pairs,
            name=self.script.label,
        )
        bound: Any = bind(job)
        bound.knob_sources["aug"] = (
            "not known: a script's augmentation is its own code (the loader ledger times the Dataset's transform "
            "apart where the Dataset holds it as .transform)"
        )
        scale = Scale(self.spec.scale, (0, 0), num_samples=0, batch_size=bound.batch_size)
        device = str(bound.device)
        observe = self.spec.observe_steps
        ctx = RunContext(bound.info, scale, Knobs(device=device), device, bound, bound.batch_size, observe, bound, self)
        ctx.shared["script"] = self.script  # advice in the script's terms (its flags, its lines), never Job fields
        self._bound, self._ctx = bound, ctx
        return bound, ctx

    def window_begins(self) -> None:
        """Before the probes start: the loss module the warm-up showed receiving the labels becomes the job's."""
        if self._pick is None:
            return
        criterion, self._pick = self._pick.choose(), None
        self._bound.job.criterion = criterion
        if criterion is not None and self.script.ignore_index is None:
            self._bound.job.ignore_index = ignore_index_of(criterion)
            if self._ctx is not None:
                info: Any = self._ctx.workload  # the job's JobInfo, which the label probe reads
                info.ignore_index = self._bound.job.ignore_index

    def close(self) -> None:
        """However the run ended: no loss-module hook left behind, and no DataLoader worker left running.

        The script was stopped inside its epoch, its workers still running. Left to interpreter exit,
        multiprocessing terminates them, and each leaves its socket folder (``$TMPDIR/pymp-*``) behind; stopped
        here, through torch's own shutdown, they exit as they would at an epoch's end and remove it."""
        if self._pick is not None:
            self._pick.close()
            self._pick = None
        iterators, self._iterators = [ref() for ref in self._iterators], []
        for it in iterators:  # a persistent loader's iterator is among them: DataLoader.__iter__ returns it
            if it is not None:
                workers.shutdown_iterator(it)

    def describe_loader(self) -> str:
        loader = self.training
        dataset = getattr(loader, "dataset", None)
        others = len(self.loaders) - 1
        return (
            f"training loader over {type(dataset).__name__} (batch {getattr(loader, 'batch_size', '?')}, "
            f"{getattr(loader, 'num_workers', '?')} workers)"
            + (f"; {others} other DataLoader(s) iterated, left alone" if others > 0 else "")
        )


def _not_called(batch: Any) -> Any:
    raise PerfsuiteError("a script's step is its own loop: perfsuite never calls a Job step for it")


@contextlib.contextmanager
def _hooked_loaders(source: _ScriptSource) -> Iterator[None]:
    """``DataLoader.__iter__`` routes through the driver while the script runs (the class, not a global hook:
    nothing else in torch sees it, and it is put back however the script ends); ``DataLoader.__init__`` notes
    the line that builds each loader (:func:`perfsuite.probes.sites.noting_built_loaders`)."""
    from torch.utils.data import DataLoader

    from perfsuite.probes.sites import noting_built_loaders

    original = DataLoader.__iter__

    def marked_iter(loader: Any) -> Any:
        return source.wrap(loader, lambda: original(loader))

    DataLoader.__iter__ = marked_iter  # type: ignore[method-assign]
    try:
        with noting_built_loaders():  # the script's DataLoader(...) line, for the settings judge
            yield
    finally:
        DataLoader.__iter__ = original  # type: ignore[method-assign]


@contextlib.contextmanager
def as_main(script: Script) -> Iterator[None]:
    """``sys.argv``, ``sys.path`` and ``sys.modules`` as ``python train.py ARGS`` would have them, then as they were
    (the working directory too, if the script changed it).

    Modules the script imported from its own directory are forgotten afterwards, so a second script with a
    ``model.py`` of its own gets its own; one of the same name imported before from elsewhere is set aside while
    the script runs (:mod:`perfsuite.harness.script.modules`).
    """
    home = script.path.parent if script.path is not None else Path.cwd()
    argv, path, modules, cwd = sys.argv[:], sys.path[:], set(sys.modules), os.getcwd()
    sys.argv = [str(script.path) if script.path is not None else str(script.module), *script.argv[1:]]
    sys.path.insert(0, str(home))
    try:
        with own_modules(home):  # another folder's model.py, imported before, is not the script's
            yield
    finally:
        sys.argv, sys.path[:] = argv, path
        with contextlib.suppress(OSError):
            os.chdir(cwd)  # a script's os.chdir is its own: --out and its lock stay where perfsuite was started
        root = str(home.resolve()) + os.sep
        for name in set(sys.modules) - modules:
            where = getattr(sys.modules.get(name), "__file__", None) or ""
            if where and os.path.abspath(where).startswith(root):
                del sys.modules[name]


def is_runpy(filename: str) -> bool:
    """runpy's own frames, told by runpy's file (a user's script may be named runpy.py too)."""
    return filename in ("<frozen runpy>", runpy.__file__)


def _trimmed_traceback(exc: BaseException) -> str:
    """The script's traceback as Python would print it for ``python train.py``: perfsuite's and runpy's frames out."""
    te = traceback.TracebackException.from_exception(exc)
    todo = [te]
    while todo:
        current = todo.pop()
        kept = [f for f in current.stack if not f.filename.startswith(_PACKAGE) and not is_runpy(f.filename)]
        current.stack = traceback.StackSummary.from_list(kept)
        todo += [c for c in (current.__cause__, current.__context__) if c is not None]
    return "".join(te.format())


def _run(script: Script) -> None:
    if script.module is not None:
        runpy.run_module(script.module, run_name="__main__", alter_sys=True)
    else:
        assert script.path is not None
        runpy.run_path(str(script.path), run_name="__main__")


@dataclass
class ScriptRun(Recorded):
    """What a script's phases recorded, with the Result's notes and where the script was stopped."""

    notes: list[str] = field(default_factory=list)
    stop: ScriptStop | None = None


def drive_script(script: Script, spec: Any, probes: Sequence[Probe]) -> ScriptRun:
    """Run ``script`` unchanged under the run's phases (see the module docstring) and return what they recorded.

    ``spec`` is the :class:`perfsuite.harness.runner.RunSpec` (steps, warm-up, observed steps, watchdog).
    """
    if spec.job_knobs:
        raise ScriptError(
            f"knobs {', '.join(sorted(spec.job_knobs))} asked of script {script.label!r}, but a script builds its own "
            "DataLoader and step: set them in the script (or its command-line arguments) and drop them here"
        )
    if spec.mutate is not None:
        raise ScriptError(f"mutate= cannot apply to script {script.label!r}: perfsuite runs the script as it is")
    source = _ScriptSource(script, spec)
    source.driver = Driver(spec, probes, source, dog=Watchdog(spec.watchdog, loader=source))
    # a script outside any git repository: its sites are named relative to its own folder (a module's: the
    # working directory it is found from), the same from every directory (perfsuite.core.source_paths)
    folder = script.path.parent if script.path is not None else Path.cwd()
    try:
        with anchored_at(folder):
            return _drive(script, spec, probes, source)
    except Exception as exc:  # torch's SIGCHLD handler raises a worker's death in whatever code runs then
        death = worker_death(exc)
        if death is None:
            raise
        raise _worker_died(script, source, death, fetching=source.error is not None) from None


def _drive(script: Script, spec: Any, probes: Sequence[Probe], source: _ScriptSource) -> ScriptRun:
    driver = source.driver
    assert driver is not None
    failure: BaseException | None = None
    try:
        with _hooked_loaders(source), as_main(script), _exits_caught(source):
            try:
                _run(script)
            except Stop:
                pass
            except _Exited as exc:  # os._exit: where the run is not done, the script ended before it had its steps
                if driver.phase != DONE:
                    failure = _ended_early(script, spec, source, f"called os._exit({exc.status})")
            except SystemExit as exc:
                if exc.code not in (None, 0) and driver.phase != DONE:
                    failure = _ended_early(script, spec, source, f"exited with status {exc.code!r}")
                elif exc.code not in (None, 0):
                    failure = ScriptError(
                        f"{script.command()} exited with status {exc.code!r} after {driver.batches} training batch(es)"
                    )
            except (KeyboardInterrupt, RunTimeout):
                raise
            except Exception as exc:  # noqa: BLE001 - the script's own failure, shown as the script's
                death = worker_death(exc)  # torch's SIGCHLD handler raised it in the script's step
                failure = (
                    _worker_died(script, source, death, fetching=False)
                    if death is not None
                    else ScriptError(
                        f"{script.command()} raised {type(exc).__name__}: {exc} (its traceback is above; after "
                        f"{driver.batches} training batch(es), in the {driver.phase} phase)",
                        _trimmed_traceback(exc),
                    )
                )
    finally:
        driver.close()
        source.close()
        for probe in probes:
            probe.finish()
    if source.error is not None:
        raise source.error
    timed_out = getattr(driver.dog, "_pending", None)  # off the main thread the deadline lands as an exception
    if isinstance(timed_out, RunTimeout):
        raise timed_out
    if failure is not None:
        raise failure
    if driver.phase != DONE or driver.plan is None:
        raise _ended_early(script, spec, source)
    ran = driver.recorded()
    threads = fit_threads(ran.job, reference=False, where="the script")  # notes only: a script keeps its threads
    found = f"{EXEC_NOTE}{script.command()}: {source.describe_loader()}; {source.found.describe()}"
    notes = [found, *threads.notes]
    if script.flip_pairs:  # never accepted and ignored: the swap is perfsuite check's to test
        notes.append(
            f"flip_pairs {list(script.flip_pairs)} not checked here: a script's batches do not show which samples its "
            "flip mirrored; perfsuite check (perfsuite.testing.check_script_transform) tests the swap"
        )
    stop = ScriptStop(driver.batches, source.epochs, {"speed of light": SCRIPT_NO_SOL})
    return ScriptRun(ran.job, ran.timings, ran.sol_ms, ran.last_batch, ran.plan, notes, stop)


def _no_chosen_loader(source: _ScriptSource, again: Any) -> ScriptError:
    """``--loader 9`` when the script iterates a loader it iterated before, with no 9th seen: its epoch loop has
    shown every DataLoader it uses, so the run stops here rather than after the script's whole training."""
    seen = ", ".join(f"{type(ld).__name__} over {type(getattr(ld, 'dataset', None)).__name__}" for ld in source.loaders)
    number = next(i for i, ld in enumerate(source.loaders, 1) if ld is again)
    return ScriptError(
        f"loader={str(source.script.loader)!r} matched none of the DataLoaders {source.script.command()} iterated "
        f"({seen}) before it iterated DataLoader number {number} again (a new epoch); name one of those by the "
        "class of its dataset or loader, or by its number"
    )


class _Exited(BaseException):
    """The script called ``os._exit(status)`` in this process (:func:`_exits_caught`)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@contextlib.contextmanager
def _exits_caught(source: _ScriptSource) -> Iterator[None]:
    """``os._exit`` in the script's own thread unwinds to :func:`drive_script` instead of ending perfsuite's process
    with it, so perfsuite can say the script ended at which step (``os._exit(0)`` mid-training would otherwise end
    ``perfsuite exec`` with status 0 and no Result). A forked child's ``os._exit`` (a DataLoader worker's,
    multiprocessing's) is its own; in another thread of the script it still ends the process, after the one line.
    """
    import threading

    real, pid, main = os._exit, os.getpid(), threading.main_thread()

    def caught(status: int) -> Any:
        if os.getpid() != pid:
            real(status)
        if threading.current_thread() is not main:
            driver = source.driver
            where = f"after {driver.batches} training batch(es), in the {driver.phase} phase" if driver else ""
            print(
                f"perfsuite: error: {source.script.command()} called os._exit({status}) in a thread {where}, "
                "before perfsuite had its steps; no Result was written",
                file=sys.stderr,
                flush=True,
            )
            real(2)
        raise _Exited(status)

    os._exit = caught
    try:
        yield
    finally:
        os._exit = real


def _worker_died(script: Script, source: _ScriptSource, death: WorkerDeath, fetching: bool) -> ScriptError:
    """One line: which worker of the training loader died, of which signal, at which batch, and what to do.

    Where torch lost the signal (it saw the worker gone while unpickling a batch), the worker's exit status says it.
    """
    driver = source.driver
    assert driver is not None
    if death.signal is None:
        for worker in getattr(source._it, "_workers", None) or ():
            worker.join(timeout=1.0)  # reaped: its exit status is known
            code = getattr(worker, "exitcode", None)
            if (
                str(getattr(worker, "pid", "")) in death.pids.replace(",", " ").split()
                and code is not None
                and code < 0
            ):
                death = WorkerDeath(death.pids, signal_name(signal.strsignal(-code) or str(-code)))
    phase = (source.failed_in or driver.phase) if fetching else driver.phase
    at = (
        f"while the loader fetched training batch {driver.batches + 1}"
        if fetching
        else f"while the script ran training batch {driver.batches}"
    )
    error = ScriptError(
        f"{script.command()}: its training {death.what()} {at} (epoch {source.epochs}, the {phase} phase); "
        f"{death.fix()}"
    )
    error.worker_death = death  # the CLI tells a process group's SIGTERM (a CI time limit) from a crash by it
    return error


def _ended_early(script: Script, spec: Any, source: _ScriptSource, how: str = "ended") -> ScriptError:
    """What to say when the script returned (or ``how`` it ended) before the run had its steps."""
    driver = source.driver
    assert driver is not None
    if source.training is None:
        if not source.loaders:
            return ScriptError(
                f"{script.command()} ended without iterating a torch DataLoader, and perfsuite exec marks the steps "
                "by the training DataLoader's batches. A loop over something else (a generator, a list of tensors, "
                "a DataLoader subclass whose __iter__ does not call DataLoader.__iter__) cannot be measured this way: "
                "wrap the training step in a perfsuite.Job instead (docs/own_job.md)"
            )
        seen = ", ".join(
            f"{type(ld).__name__} over {type(getattr(ld, 'dataset', None)).__name__}" for ld in source.loaders
        )
        return ScriptError(
            f"loader={script.loader!r} matched none of the DataLoaders {script.command()} iterated ({seen}); "
            "name one by the class of its dataset or loader, or leave loader out to take the first"
        )
    plan = driver.plan
    needed = spec.warmup + spec.steps + (plan.period_steps + plan.observe_steps if plan is not None else 0)
    if plan is None:
        needed += spec.observe_steps + period_steps_for(spec.period_steps, None)
    if how != "ended":  # the script ends itself (os._exit): more data would not help
        return ScriptError(
            f"{script.command()} {how} after {driver.batches} training batch(es) ({source.epochs} epoch(s)), in the "
            f"{driver.phase} phase, before {_what_ended(driver.phase)} ended, so no Result was written; this run needs "
            f"{needed} batches before the script exits: end it after its training loop, or ask for fewer steps "
            "(--steps, --warmup, --period-steps)"
        )
    return ScriptError(
        f"{script.command()} {how} after {driver.batches} training batch(es) ({source.epochs} epoch(s)), in the "
        f"{driver.phase} phase, before {_what_ended(driver.phase)} ended; this run needs at least {needed} "
        f"(warm-up {spec.warmup}, window {spec.steps}, then the period scan and {spec.observe_steps} observed "
        "step(s)): give the script more epochs or data (its own arguments), or ask for fewer steps (--steps, "
        "--warmup, --period-steps)"
    )


def _what_ended(phase: str) -> str:
    return "the observed steps" if phase == "observe" else "the measured window"
