"""The kinds of host-device synchronisation a CUDA training step can force: one table, read by the sync probe,
the docs (docs/syncs.md) and the tests.

A CPU run has no device to wait for, so perfsuite predicts each kind from what
the step does to the tensors a GPU run would hold on the device
(:mod:`perfsuite.probes.residency`). On CUDA the same rules are applied to the
tensors' real devices and real pinned state, and the CUDA runtime's own
synchronisation calls (the profiler's ``cudaStreamSynchronize`` and friends,
with the Python stack that issued them) are the ground truth that
``scripts/sync_truth.py`` compares the prediction with.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SyncKind(str, enum.Enum):
    """What made the host wait. The value is the name reports, the Result and the exact file use."""

    READ = "read"
    DEVICE_TO_HOST = "device-to-host copy"
    BLOCKING_COPY = "blocking copy"
    PAGEABLE_COPY = "pageable copy"
    EXPLICIT = "explicit sync"
    DATA_DEPENDENT = "data-dependent size"
    RUNTIME = "CUDA runtime sync"  # CUDA only: a runtime call the rules above did not account for

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class KindRow:
    """One row of the published table (docs/syncs.md): what the kind is, how a CPU run sees it, its source."""

    kind: SyncKind
    what: str
    examples: str
    fix: str
    source: str
    # Whether the CUDA runtime shows it as a stream/device synchronisation call (False: the host stalls on a
    # staging copy; only a pinned-memory check at the copy, as vLLM's CI makes, sees it on a GPU).
    runtime_call: bool = True


# The public documents perfsuite names a fix by: the one table, read by this module's kinds and by the settings
# judge (perfsuite.judge.settings.SETTINGS), so every fix a user reads points at a page they can open.
SOURCES = {
    "sync-debug": "PyTorch docs, torch.cuda.set_sync_debug_mode (operations it flags as synchronizing)",
    "cuda-api-sync": 'CUDA Runtime API, "API synchronization behavior" (memcpy from pageable host memory)',
    "pin-memory": 'PyTorch docs, "A guide on good usage of non_blocking and pin_memory()" '
    "(https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)",
    "cuda-semantics": 'PyTorch docs, "CUDA semantics" (https://pytorch.org/docs/stable/notes/cuda.html)',
    "data-loading": 'PyTorch docs, "torch.utils.data" (https://pytorch.org/docs/stable/data.html)',
    "amp": 'PyTorch docs, "Automatic Mixed Precision" (https://pytorch.org/docs/stable/amp.html)',
    "compile": 'PyTorch docs, "torch.compile" (https://pytorch.org/docs/stable/generated/torch.compile.html)',
    "tuning": 'PyTorch docs, "Performance Tuning Guide" '
    "(https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)",
}

KINDS: tuple[KindRow, ...] = (
    KindRow(
        SyncKind.READ,
        "a device value read by Python",
        "loss.item(), tensor.tolist(), if tensor:, float(t), print(loss), f'{loss:.3f}'",
        "read every N steps, or keep the value on the device (accumulate, then read once)",
        SOURCES["sync-debug"],
    ),
    KindRow(
        SyncKind.DEVICE_TO_HOST,
        "a copy from the device into pageable host memory",
        "t.cpu(), t.to('cpu'), t.numpy() after .cpu(), host.copy_(device_tensor)",
        "copy into a pinned buffer with non_blocking=True and wait on an event only when the value is needed",
        SOURCES["sync-debug"],
    ),
    KindRow(
        SyncKind.BLOCKING_COPY,
        "a host-to-device copy with non_blocking=False, or a device tensor built from Python data or NumPy",
        "x.to(device), dst.copy_(host), torch.tensor([w, h], device=d), torch.as_tensor(array, device=d)",
        "DataLoader(pin_memory=True) and x.to(device, non_blocking=True); build constants once, outside the step",
        SOURCES["sync-debug"],
    ),
    KindRow(
        SyncKind.PAGEABLE_COPY,
        "a host-to-device copy with non_blocking=True from memory that is not pinned (or pinned, not contiguous)",
        "DataLoader(pin_memory=False) then x.to(device, non_blocking=True)",
        "DataLoader(pin_memory=True), or x.pin_memory() before the copy",
        SOURCES["cuda-api-sync"] + "; " + SOURCES["pin-memory"],
        runtime_call=False,
    ),
    KindRow(
        SyncKind.EXPLICIT,
        "an explicit wait for the device",
        "torch.cuda.synchronize(), torch.accelerator.synchronize(), event.synchronize(), stream.synchronize()",
        "drop it from the step (time with CUDA events read after the loop)",
        SOURCES["cuda-semantics"] + ": asynchronous execution, streams and events",
    ),
    KindRow(
        SyncKind.DATA_DEPENDENT,
        "an operation whose output size depends on device data",
        "nonzero, masked_select, x[bool_mask], unique, bincount, torch.where(cond), repeat_interleave(tensor)",
        "a fixed-size form: torch.where(cond, a, b), a multiplied mask, repeat_interleave(output_size=...)",
        SOURCES["sync-debug"],
    ),
)

KIND_ROW = {row.kind: row for row in KINDS}


def kind_named(name: str) -> SyncKind | None:
    """The kind a Result names (``"blocking copy"``), or None for a name from another version."""
    try:
        return SyncKind(name)
    except ValueError:
        return None


def site_op(entry: object) -> str:
    """A sync site's operation as people read it: ``Tensor.to (pageable copy)``; the op alone for entries recorded
    before kinds were."""
    from collections.abc import Mapping

    if not isinstance(entry, Mapping):
        return "sync"
    op = str(entry.get("call") or entry.get("op") or "sync")
    kind = entry.get("kind")
    return f"{op} ({kind})" if kind else op


TESTS = "tests/unit/test_sync_kinds.py"


def render_table() -> str:
    """The kinds as the markdown table of docs/syncs.md (scripts/metrics_table.py writes it there)."""
    rows = [
        "| kind | what makes the host wait | for example | the fix | a CUDA runtime call | source |",
        "|---|---|---|---|---|---|",
    ]
    for row in KINDS:
        cells = (
            f"`{row.kind.value}`",
            row.what,
            row.examples.replace("|", "\\|"),
            row.fix,
            "yes" if row.runtime_call else "no: a staging copy (checked by the source's pinned state)",
            row.source,
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def fixes(head_kinds: object, base_kinds: object = None) -> list[str]:
    """``fix (pageable copy): DataLoader(pin_memory=True), ...`` for each kind that ``head_kinds`` (a Result's
    ``detail["kinds"]``) has more of than ``base_kinds``: the one wording of each fix, wherever perfsuite gives it."""
    from collections.abc import Mapping

    head = head_kinds if isinstance(head_kinds, Mapping) else {}
    base = base_kinds if isinstance(base_kinds, Mapping) else {}
    out = []
    for name, count in head.items():
        kind = kind_named(str(name))
        if kind in KIND_ROW and float(count) > float(base.get(name, 0.0)):
            out.append(f"fix ({kind.value}): {KIND_ROW[kind].fix}")
    return out
