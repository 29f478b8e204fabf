"""Settings as exact facts: a change that undoes a documented fix regresses, any other change is named.

On a face-parsing repository under ``perfsuite exec``, ``num_workers 2 -> 0``
exited 0: its main-thread loading went x30.5, measured but not judged on a busy
machine. The settings are documented fixes (each named with its public source), so they are compared exactly,
every time both runs know them (:data:`SETTINGS`, the one table: the loader's
``num_workers``, ``pin_memory``, ``persistent_workers``, ``prefetch_factor``
and batch size, ``non_blocking`` copies, the AMP dtype, compile,
``channels_last``, cuDNN's autotuner, TF32 and the intra-op threads):

* a change that undoes a fix is **regressed (setting)**, named at the line
  that builds the loader (``train.py:64 DataLoader(num_workers=2 -> 0)``) or
  makes the copy, with the figures measured beside it, judged or not;
* any other change is **changed (setting)**; either way the message says how
  to accept it (``perfsuite accept HEAD BASE``, one command for a Job, a perf
  test and a script);
* a setting pinned by a marker (``@pytest.mark.perf(num_workers=2)``, a
  :class:`~perfsuite.judge.thresholds.SettingPin`) or by the committed exact
  file (its ``settings`` section, :func:`pinned_changes`, written by
  ``--perfsuite-update-exact``) fails whenever a run differs.

A setting is read from the knobs perfsuite set or read from the user's
objects; what a script sets in its own code is read as the run had it (the
AMP dtype the forward ran, whether anything compiled, the copies'
``non_blocking``, the process's switches: :mod:`perfsuite.probes.settings`).
A setting neither way knows (``knob_sources`` "not known"/"not applied", a
Result recorded before) is not compared: nothing is known to have changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.core.results import Result
from perfsuite.judge.verdict import Outcome, Verdict, format_value, value_ratio
from perfsuite.probes.synckinds import KIND_ROW, SOURCES, SyncKind

# The DataLoader arguments a Result records, in the order they are reported.
LOADER_SETTINGS = ("num_workers", "persistent_workers", "pin_memory", "prefetch_factor", "batch_size")
_UNKNOWN_SOURCES = ("not known", "not applied")


def recorded(result: Result, name: str) -> tuple[bool, Any]:
    """(known, value) of one loader setting in a Result; batch_size is the batch the run used."""
    source = result.knob_sources.get(name, "")
    if source.startswith(_UNKNOWN_SOURCES):
        return False, None
    if name == "batch_size":
        return True, result.batch_size
    return (name in result.knobs), result.knobs.get(name)


@dataclass(frozen=True)
class Setting:
    """One setting compared between base and head, and which of its values is the documented fix.

    ``fixed`` says whether a value is the fixed one (None: no value is, a change is only *changed*);
    ``fix`` says what the fix does and ``source`` the public page that documents it; ``costs`` are the
    measured figures shown beside a change (whether or not their own verdicts judged them); ``call`` is how
    the user's code sets it.
    """

    name: str
    call: str
    fixed: Callable[[Any], bool] | None = None
    fix: str = ""
    costs: tuple[str, ...] = ("step_ms",)
    source: str = ""

    def undone(self) -> str:
        """``undoes a documented fix: <what it does> (<its public source>)``."""
        return f"undoes a documented fix: {self.fix}, see {self.source}"


def _on(value: Any) -> bool:
    return value is True


def _low_precision(value: Any) -> bool:
    return value not in (None, False, "", "none", "fp32", "float32")


# The one table: every setting a Result records, in the order they are reported, with the direction of its fix
# and the public page that documents the fix (perfsuite.probes.synckinds.SOURCES).
SETTINGS = (
    Setting(
        "num_workers",
        "DataLoader",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
        "batches load in worker processes beside the step, not between steps in the training process",
        ("main_load_ms_per_step", "step_ms", "data_wait_frac"),
        SOURCES["data-loading"],
    ),
    Setting(
        "pin_memory",
        "DataLoader",
        _on,
        "pinned host memory, so copies to the GPU can overlap with compute",
        ("step_ms", "data_wait_frac"),
        SOURCES["pin-memory"],
    ),
    Setting(
        "persistent_workers",
        "DataLoader",
        _on,
        "workers kept across epochs instead of restarted at each",
        ("epoch_fetch_ms", "step_ms"),
        SOURCES["data-loading"],
    ),
    Setting("prefetch_factor", "DataLoader", costs=("data_wait_frac", "step_ms")),
    Setting("batch_size", "DataLoader"),
    Setting(
        "non_blocking",
        ".to(device, non_blocking=...)",
        _on,
        "copies to the device that do not block the host",
        ("step_ms", "data_wait_frac"),
        SOURCES["pin-memory"],
    ),
    Setting("amp", "autocast", _low_precision, "the forward in bf16/fp16 autocast, not FP32", source=SOURCES["amp"]),
    Setting(
        "compile",
        "torch.compile",
        lambda v: bool(v) and v != "none",
        "a torch.compile'd model",
        source=SOURCES["compile"],
    ),
    Setting("channels_last", "memory_format"),
    Setting(
        "cudnn_benchmark",
        "torch.backends.cudnn.benchmark",
        _on,
        "cuDNN's autotuner picks convolution kernels",
        source=SOURCES["tuning"],
    ),
    Setting(
        "tf32",
        "torch.backends.cuda.matmul.allow_tf32",
        _on,
        "TF32 matmuls and convolutions on Ampere+",
        source=SOURCES["cuda-semantics"],
    ),
    Setting("intra_op_threads", "torch.set_num_threads", costs=("step_ms", "step_cpu_ms")),
)
BY_NAME = {s.name: s for s in SETTINGS}
# How a change is made the new baseline: the same for a Job, a perf test and a script (docs/settings.md).
ACCEPT = "perfsuite accept HEAD BASE"


@dataclass(frozen=True)
class Reading:
    """A setting as one Result knows it: its value and the line that set it ("" when not known)."""

    known: bool
    value: Any = None
    site: str = ""


def _knob(result: Result, name: str) -> tuple[bool, Any]:
    """A knob perfsuite set or read from the user's objects (not one it reports as not applied or not known)."""
    source = result.knob_sources.get(name, "")
    return (name in result.knobs and not source.startswith(_UNKNOWN_SOURCES)), result.knobs.get(name)


def _env(result: Result) -> dict[str, Any]:
    settings = result.environment.get("settings")
    return settings if isinstance(settings, dict) else {}


def _site_of(detail: Any) -> str:
    sites = detail.get("sites") if isinstance(detail, dict) else None
    return str(sites[0].get("site", "")) if isinstance(sites, list) and sites and isinstance(sites[0], dict) else ""


def read(result: Result, name: str) -> Reading:
    """One setting of a Result: a knob perfsuite knows, else what the run measured (a script's own code)."""
    if name in LOADER_SETTINGS:
        known, value = recorded(result, name)
        built = _env(result).get("loader_built_at")
        return Reading(known, value, str(built.get("site", "")) if isinstance(built, dict) else "")
    known, value = _knob(result, name)
    if known:
        return Reading(True, value)
    if name == "non_blocking":
        copies = result.metric("h2d_bytes_per_step").detail.get("copies")
        if not copies:
            return Reading(False)
        blocking = [c for c in copies if not c.get("non_blocking")]
        return Reading(True, not blocking, str((blocking or copies)[0].get("site", "")))
    if name == "amp":
        m = result.metric("amp_lowp_frac")
        if not m.available:
            return Reading(False)
        lowp = [d for d in ("bfloat16", "float16") if (m.detail.get("dtypes") or {}).get(d)]
        forward = _site_of(result.metric("input_format").detail)
        return Reading(True, lowp[0] if m.detail.get("autocast_enabled") and lowp else None, forward)
    if name == "compile":
        m = result.metric("compile_s")
        if m.available:
            return Reading(True, True)
        return Reading("nothing was compiled" in (m.reason or ""), False)
    if name == "channels_last":
        fmt = result.metric("input_format")
        if not fmt.available or ";" not in str(fmt.value):
            return Reading(False)
        params = str(fmt.value).split(";")[-1]
        return Reading(True, "channels_last" in params and "contiguous" not in params, _site_of(fmt.detail))
    env = _env(result)
    if name == "intra_op_threads" and name not in env:
        contention = result.environment.get("contention")
        env = contention if isinstance(contention, dict) else {}
    return Reading(name in env, env.get(name))


# Why a setting is judged as an exact fact and not by the timing beside it, in every regressed setting's reason.
AS_FACT_CPU = (
    "judged as a fact, not by this machine's timing: its cost shows on a GPU runner, where the step waits for "
    "the loader and the copies, not on a CPU whose cores the loader and the step share"
)
AS_FACT_GPU = "judged as a fact, not by one pair of runs' timing"
# What a measured figure beside a setting is and is not: the setting's verdict does not rest on it.
BESIDE = "measured beside it (its own row judges it)"


def _one_figure(name: str, b: float, h: float, against: bool) -> str:
    """``step_ms 40 -> 90 ms (x2.25)``; a figure that moved the better way beside a setting regressed on a CPU says
    why it reads the wrong way."""
    from perfsuite.core import metrics as registry

    spec = registry.find(name)
    unit = spec.unit if spec is not None and spec.kind != "shares" and spec.unit != "fraction" else ""
    ratio = value_ratio(b, h)
    text = f"{name} {format_value(b)} -> {format_value(h)}{' ' + unit if unit else ''}"
    if not ratio:
        return text
    better = spec.better if spec is not None else "lower"
    improved = (ratio < 1.0) if better == "lower" else (ratio > 1.0)
    if against and improved:
        return text + f" (x{ratio:.3g}: better on this CPU, where the fix's gain does not show)"
    return text + f" (x{ratio:.3g})"


def _measured(base: Result, head: Result, names: tuple[str, ...], regressed: bool = False) -> str:
    """``; measured beside it ...: main_load_ms_per_step 1.25 -> 45.9 ms/step (x36.7)``, of the figures both runs
    have; a figure the contention guard would not compare (one run much busier than the other) is named as not
    comparable instead of shown as evidence."""
    from perfsuite.core import metrics as registry
    from perfsuite.judge.contention import Guard, clock_of, load_of

    guard = Guard(load_of(base), load_of(head))
    parts, busy = [], []
    for name in names:
        b, h = base.metric(name), head.metric(name)
        before, after = b.value, h.value
        if (
            not (b.available and h.available)
            or not isinstance(before, int | float)
            or not isinstance(after, int | float)
        ):
            continue
        spec = registry.find(name)
        if spec is not None and guard.contended(clock_of(spec)):
            busy.append(name)
            continue
        parts.append(_one_figure(name, float(before), float(after), regressed and not head.fingerprint.gpu_model))
    if busy:
        parts.append(
            f"{', '.join(busy)} not comparable (other processes took a different share of the CPU in the two runs: "
            f"{guard.figures()})"
        )
    return f"; {BESIDE}: {', '.join(parts)}" if parts else ""


def _pageable_note(head: Result, name: str) -> str:
    """The fix a non-blocking copy from unpinned memory needs, when head has that pair of settings."""
    if name not in ("non_blocking", "pin_memory"):
        return ""
    copies, pinned = read(head, "non_blocking"), read(head, "pin_memory")
    if not (copies.known and copies.value is True and pinned.known and pinned.value is False):
        return ""
    row = KIND_ROW[SyncKind.PAGEABLE_COPY]
    return (
        "; non_blocking=True from pageable (unpinned) memory waits like a blocking copy, since the copy is "
        f"staged through a pinned buffer first: fix ({row.kind.value}): {row.fix} ({SOURCES['pin-memory']})"
    )


def setting_changes(base: Result, head: Result, test_id: str) -> list[Verdict]:
    """One verdict per setting both runs know and that differs: *regressed* where head undoes a documented fix
    (``train.py:64 DataLoader(num_workers=2 -> 0)``), *changed* otherwise; both name how to accept it."""
    from perfsuite.judge.sites import short_path

    verdicts = []
    workers = (read(base, "num_workers"), read(head, "num_workers"))
    for setting in SETTINGS:
        name = setting.name
        b, h = read(base, name), read(head, name)
        if not (b.known and h.known) or b.value == h.value:
            continue
        if name in ("persistent_workers", "prefetch_factor") and 0 in (workers[0].value, workers[1].value):
            continue  # follows from num_workers 0: named there
        site = h.site or b.site
        where = f"{short_path(site)} " if site else ""
        what = (
            f"{where}{setting.call}({name}={format_value(b.value)} -> {format_value(h.value)})"
            if setting.call == "DataLoader"
            else f"{where}{name} {format_value(b.value)} -> {format_value(h.value)} ({setting.call})"
        )
        regressed = setting.fixed is not None and setting.fixed(b.value) and not setting.fixed(h.value)
        measured = _measured(base, head, setting.costs, regressed)
        note = _pageable_note(head, name)
        accept = f"; if intended, accept it as the baseline: `{ACCEPT}`"
        if regressed:
            fact = AS_FACT_GPU if head.fingerprint.gpu_model else AS_FACT_CPU
            message = f"regressed (setting): {what} {setting.undone()}; {fact}{note}{measured}{accept}"
            outcome = Outcome.REGRESSED
        else:
            message = f"changed (setting): {what}{note}{measured}{accept}"
            outcome = Outcome.CHANGED
        verdicts.append(Verdict(test_id, name, b.value, h.value, None, outcome, message, cause=None))
    return verdicts


def check_setting(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be a pinned ``name`` (None: it can), checked as the DataLoader argument would be."""
    if name not in LOADER_SETTINGS:
        return f"is not a loader setting; write one of {', '.join(LOADER_SETTINGS)}"
    if name in ("persistent_workers", "pin_memory"):
        return None if isinstance(value, bool) else "must be True or False"
    if value is None and name == "prefetch_factor":
        return None  # torch's default
    least = 0 if name == "num_workers" else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        return f"must be an integer >= {least}"
    return None


def loader_settings(result: Result) -> dict[str, Any]:
    """The loader settings a Result knows, as the committed exact file pins them."""
    out = {}
    for name in LOADER_SETTINGS:
        known, value = recorded(result, name)
        if known and check_setting(name, value) is None:
            out[name] = value
    return out


def pinned_changes(expected: Mapping[str, Any], head: Result, test_id: str, source: str, update: str) -> list[Verdict]:
    """Each setting ``expected`` pins (the committed file's) that head runs with otherwise: a regression."""
    from perfsuite.judge.sites import short_path

    verdicts = []
    for name, want in expected.items():
        known, got = recorded(head, name)
        if not known:
            message = f"{name} is pinned to {want!r} in {source} but this run did not record it"
            verdicts.append(Verdict(test_id, name, want, None, None, Outcome.UNAVAILABLE, message))
        elif got != want or type(got) is not type(want):
            rule = BY_NAME.get(name)
            undone = rule is not None and rule.fixed is not None and rule.fixed(want) and not rule.fixed(got)
            why = f" {rule.undone()}" if undone and rule is not None else ""
            site = read(head, name).site
            where = f"{short_path(site)} " if site else ""
            message = (
                f"{'regressed (setting): ' if undone else ''}{where}{name} {format_value(want)} -> {format_value(got)} "
                f"(loader setting pinned in {source}){why}; if intended, update it: `{update}`"
            )
            verdicts.append(Verdict(test_id, name, want, got, None, Outcome.REGRESSED, message))
    return verdicts
