"""One finding per loader stage that costs a share of its CPU, each with its own fix, costliest first.

Workers forked again at each epoch are the stage whose fix a run can try (``persistent_workers=True``).
"""

from __future__ import annotations

from perfsuite.tools.doctor import predictions as model
from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Fix, Predicted, Unavailable
from perfsuite.tools.doctor.rules.base import Rule, band, input_bound, wait_text

STAGE_FIXES = {
    "collate_fn": "make {code} cheap: stack arrays (torch.utils.data.default_collate) instead of per-sample Python",
    "transform": "move the random part of {code} to the device, batched (perfsuite: aug='gpu'; Kornia), "
    "or make it cheaper",
    "__getitem__": "{code} reads and decodes: store images at the size you train on, or decode on the GPU "
    "(torchvision.io.decode_jpeg(device='cuda'), DALI)",
    "pin_memory": "pin fewer bytes: ship uint8 from the loader and convert on the device",
    "worker processes": "DataLoader(persistent_workers=True): the workers are forked again at every epoch now",
    "worker processes (persistent)": "a larger batch_size: fewer batches to pass between processes per sample",
    "worker processes (no epoch)": "a larger batch_size: fewer batches to pass between processes per sample "
    "(persistent_workers=True acts only across an epoch boundary, and none fell in the window)",
}
STAGE_NOT_TRIED = {
    "collate_fn": "a change to {code}, the job's code: perfsuite cannot make it for you",
    "transform": "a change to {code}: moving it to the device needs a CUDA device and the job's code",
    "__getitem__": "a change to the stored data or to {code}: perfsuite cannot make it for you",
    "pin_memory": "a change to the batch's dtype in the job's code",
    "worker processes (persistent)": "the batch size changes what the model trains on: try it with perfsuite ab",
    "worker processes (no epoch)": "the batch size changes what the model trains on: try it with perfsuite ab",
}
STAGE_SHARE = 0.15  # every loader stage costing this share of its CPU or more gets its own finding
FORKED = "worker processes"


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    s = e.stages
    reconciled = f"{wait_text(e)}; {s.reconcile}" if s.reconcile else wait_text(e)
    lead = input_bound(e) and s.num_workers != 0
    out: list[Finding] = []
    for name, ms in s.by.items():
        part = s.shares.get(name, 0.0)
        if part < STAGE_SHARE and name != s.costliest:
            continue
        code = s.code.get(name, name)
        forked = name == FORKED and not s.persistent and s.epochs_started > 0
        key = name if name != FORKED or forked else f"{FORKED} ({'persistent' if s.persistent else 'no epoch'})"
        measured = (
            cf.measured(Fix.PERSISTENT)
            if forked
            else Unavailable("not tried: " + STAGE_NOT_TRIED.get(key, "a change to {code}").format(code=code))
        )
        label = "the loader's costliest stage" if name == s.costliest else "a loader stage"
        out.append(
            Finding(
                f"{band(e)}: {label} is {name}",
                f"{wait_text(e) if out else reconciled}; {name} ({code}) costs {ms:.3g} ms of CPU per sample, "
                f"{part:.0%} of the loader's",
                STAGE_FIXES.get(key, "make {code} cheaper").format(code=code),
                f"stage:{name}",
                model.predict_cut(e, part, name),
                measured,
                bottleneck=lead and not out,
            )
        )
    return out


def predict(e: Evidence, fix: Fix, workers: int | None) -> Predicted | Unavailable:
    """Persistent workers cut the workers' start-up at each epoch, part of the loader's CPU beyond its stages."""
    if FORKED not in e.stages.by:
        return Unavailable("the loader ledger measured no worker start-up")
    if e.stages.epochs_started == 0:
        return Unavailable("no epoch began in the window, so its workers' start-up at an epoch was not measured")
    return model.predict_cut(e, e.stages.shares[FORKED], FORKED)


RULE = Rule("stages", find, (Fix.PERSISTENT,), predict)
