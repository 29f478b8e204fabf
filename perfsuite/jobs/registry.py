"""Finding workloads and jobs by name: the registry, and the entry points other packages declare.

A name reaches a run from the CLI (``perfsuite run NAME``), a test (``perf_run("NAME")``) or an
entry point; this module turns it into a Workload or a Job. The reference workloads register
here, so the workload modules themselves need only the contract (:mod:`perfsuite.jobs.workload`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from perfsuite.errors import JobError, WorkloadError
from perfsuite.jobs.contract import Job, call_factory
from perfsuite.jobs.workload import SCALES, TARGET_KINDS, Workload

_REGISTRY: dict[str, type[Workload]] = {}
_BUILTINS_LOADED = False


def register_workload(cls: type[Workload]) -> type[Workload]:
    """Class decorator: make a workload available by its ``name`` (CLI, fixtures, plugin)."""
    for attr in ("name", "summary", "seed_doc", "target_kind", "scales"):
        if not hasattr(cls, attr):
            raise WorkloadError(f"workload class {cls.__name__} must set the class attribute {attr!r}")
    if cls.target_kind not in TARGET_KINDS:
        raise WorkloadError(
            f"workload {cls.name!r} has target_kind={cls.target_kind!r}; write one of {', '.join(TARGET_KINDS)}"
        )
    missing = [s for s in SCALES if s not in cls.scales]
    if missing:
        raise WorkloadError(f"workload {cls.name!r} must define scales {', '.join(missing)}")
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise WorkloadError(f"a workload named {cls.name!r} is already registered ({existing.__qualname__})")
    _REGISTRY[cls.name] = cls
    return cls


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        from perfsuite.jobs.workloads import captcha_slider, face_parsing, gray_classifier, super_resolution

        for cls in (
            face_parsing.FaceParsing,
            captcha_slider.CaptchaSlider,
            super_resolution.SuperResolution,
            gray_classifier.GrayClassifier,
        ):
            register_workload(cls)


def workload_names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def get_workload(name: str) -> Workload:
    """An instance of the registered workload ``name``."""
    _load_builtins()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise WorkloadError(f"unknown workload {name!r}; write one of {', '.join(sorted(_REGISTRY))}") from None


# --------------------------------------------------------------------------- jobs and entry points


_JOBS: dict[str, tuple[Callable[..., Job], str]] = {}
WORKLOAD_GROUP = "perfsuite.workloads"
_LOADED_GROUPS: dict[str, list[str]] = {}


def register_job(name: str, factory: Callable[..., Job] | None = None, summary: str = "") -> Any:
    """Make a job factory runnable by name (``perfsuite run NAME``, ``perf_run("NAME")``).

    Use as ``register_job("faces", make_job)`` or as a decorator
    ``@register_job("faces")``. The factory takes the device (or nothing) and
    returns a :class:`Job`.
    """

    def add(fn: Callable[..., Job]) -> Callable[..., Job]:
        _load_builtins()
        if name in _REGISTRY:
            raise JobError(f"a workload named {name!r} already exists; give the job another name")
        existing = _JOBS.get(name)
        if existing is not None and getattr(existing[0], "__qualname__", None) != getattr(fn, "__qualname__", None):
            raise JobError(f"a job named {name!r} is already registered ({existing[0]!r})")
        doc = (inspect.getdoc(fn) or "").splitlines()
        _JOBS[name] = (fn, summary or (doc[0] if doc else "a user's training job"))
        return fn

    return add(factory) if factory is not None else add


def job_names() -> list[str]:
    load_entry_points()
    return sorted(_JOBS)


def job_summary(name: str) -> str:
    return _JOBS[name][1]


def get_job_factory(name: str) -> Callable[..., Job] | None:
    load_entry_points()
    entry = _JOBS.get(name)
    return entry[0] if entry else None


def _entry_points(group: str) -> list[Any]:
    from importlib.metadata import entry_points

    return list(entry_points(group=group))


def load_entry_points(group: str = WORKLOAD_GROUP) -> list[str]:
    """Load the workloads (or probes) other packages declare under an entry-point group, once.

    ``[project.entry-points."perfsuite.workloads"]``: each name points to a
    Workload subclass (registered under its ``name``) or a job factory
    (registered under the entry point's name). Probes (``"perfsuite.probes"``)
    load in :func:`perfsuite.probes.entry_point_probes`.
    """
    if group in _LOADED_GROUPS:
        return _LOADED_GROUPS[group]
    names: list[str] = []
    _LOADED_GROUPS[group] = names
    if group != WORKLOAD_GROUP:
        return names
    for ep in _entry_points(group):
        try:
            obj = ep.load()
        except Exception as exc:
            raise JobError(
                f"entry point {ep.name} = {ep.value} ({group}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(obj, type) and issubclass(obj, Workload):
            register_workload(obj)
            names.append(obj.name)
        elif callable(obj):
            register_job(ep.name, obj)
            names.append(ep.name)
        else:
            raise JobError(
                f"entry point {ep.name} = {ep.value} ({group}) is a {type(obj).__name__}; point it at "
                "a Workload subclass or a job factory returning perfsuite.Job"
            )
    return names


def is_job_target(target: Any) -> bool:
    """Does ``target`` name a user's job (a Job, a Script, a job factory, a registered job's name), not a workload?"""
    from perfsuite.jobs.script import Script

    if isinstance(target, Script):
        return True
    if isinstance(target, str):
        return get_job_factory(target) is not None
    if isinstance(target, Workload) or (isinstance(target, type) and issubclass(target, Workload)):
        return False
    return isinstance(target, Job) or callable(target)


def resolve(target: Any, device: str) -> Any:
    """A Workload, Job or Script from what a caller named: a name, a Workload, a Job, a Script or a job factory."""
    from perfsuite.jobs.script import Script

    if isinstance(target, Script):
        return target
    if isinstance(target, str):
        factory = get_job_factory(target)
        return call_factory(factory, device) if factory is not None else get_workload(target)
    if isinstance(target, (Workload, Job)):
        return target
    if isinstance(target, type) and issubclass(target, Workload):
        return target()
    if callable(target):
        return call_factory(target, device)
    raise JobError(
        f"cannot run {target!r}: pass a workload name, a Workload, a perfsuite.Job, or a function returning a Job"
    )
