"""Label spaces for the property checks: any class count, any ignore index, declared left/right swaps.

A :class:`LabelSpace` is what ``check_paired_augmentation``'s ``num_classes``,
``ignore_index``, ``fill``, ``mask_dtype`` and ``flip_pairs``/``flip_label_map``
declare, validated once, with errors that name those parameters.

* Classes are ``0..num_classes-1`` (up to 2**31); ``ignore_index`` may be
  anywhere outside them (255, -100, 65535, ...) or ``None``.
* ``mask_dtype`` must hold every class, the ignore index and the fill.
* A flip label map says which labels trade places when a sample is mirrored:
  face parsing's ``flip_pairs=[(4, 5), (6, 7), (8, 9)]`` (eyes, brows, ears).
  "Mirrored" is any reflection: a horizontal flip, or a vertical flip (which is
  a horizontal flip turned 180 degrees), since both swap the subject's left and
  right. Whether a sample was mirrored is read off the image, never from the
  mask, so a swap without a flip is caught (:mod:`perfsuite.augment.flips`).

:func:`lossy_casts` lists what integer labels become through the casts that
lose them (bfloat16 keeps integers exactly only up to 256, float16 up to 2048,
uint8/int8/int16 wrap), so a label that appears from nowhere can be traced to
the cast that made it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from perfsuite.errors import PropertyArgumentError

MASK_DTYPES = ("uint8", "int16", "int32", "int64")
MAX_CLASSES = 2**31 - 1
FUNC = "check_paired_augmentation"


def _arg(param: str, message: str) -> PropertyArgumentError:
    return PropertyArgumentError(f"{FUNC}({param}=...): {message}")


def smallest_dtype(values: Iterable[int]) -> str:
    """The smallest of :data:`MASK_DTYPES` holding every value."""
    values = list(values)
    lo, hi = min(values), max(values)
    for name in MASK_DTYPES:
        info = np.iinfo(name)
        if info.min <= lo and hi <= info.max:
            return name
    raise _arg("num_classes", f"labels {lo}..{hi} fit no integer mask dtype")


def ignore_suggestions(num_classes: int) -> list[int]:
    """Ignore indexes users write that lie outside ``0..num_classes-1``: 255 only while it is not a class."""
    return [v for v in (255, -100, num_classes) if not 0 <= v < num_classes]


@dataclass(frozen=True)
class LabelSpace:
    """The declared label space, validated (see the module docstring)."""

    num_classes: int
    ignore_index: int | None = 255
    fill: int | None = None
    mask_dtype: str = "uint8"
    flip_map: tuple[tuple[int, int], ...] = ()  # label -> label on mirrored samples, identity left out

    @classmethod
    def declare(
        cls,
        num_classes: int,
        ignore_index: int | None = 255,
        fill: int | None = None,
        mask_dtype: str | None = None,
        flip_pairs: Iterable[tuple[int, int]] | None = None,
        flip_label_map: Mapping[int, int] | None = None,
    ) -> LabelSpace:
        if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
            raise _arg("num_classes", f"got {num_classes!r}; pass the number of classes as an int, e.g. 19")
        num_classes = int(num_classes)
        if not 1 <= num_classes <= MAX_CLASSES:
            raise _arg("num_classes", f"got {num_classes}; pass 1..{MAX_CLASSES} (classes are 0..num_classes-1)")
        for name, value in (("ignore_index", ignore_index), ("fill", fill)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
                raise _arg(name, f"got {value!r}; pass an int label (e.g. 255 or -100) or None")
        ignore_index = None if ignore_index is None else int(ignore_index)
        fill = None if fill is None else int(fill)
        if ignore_index is not None and 0 <= ignore_index < num_classes:
            outside = ", ".join(str(v) for v in ignore_suggestions(num_classes))
            raise _arg(
                "ignore_index",
                f"{ignore_index} is a class (0..{num_classes - 1}); pass an index outside the "
                f"classes ({outside}) or ignore_index=None if the masks have none",
            )
        values = [0, num_classes - 1] + [v for v in (ignore_index, fill) if v is not None]
        if mask_dtype is None:
            mask_dtype = smallest_dtype(values)
        mask_dtype = str(mask_dtype).replace("torch.", "")
        if mask_dtype not in MASK_DTYPES:
            raise _arg("mask_dtype", f"got {mask_dtype!r}; pass one of {', '.join(MASK_DTYPES)}")
        info = np.iinfo(mask_dtype)
        for name, value in (("num_classes", num_classes - 1), ("ignore_index", ignore_index), ("fill", fill)):
            if value is not None and not info.min <= value <= info.max:
                raise _arg(
                    "mask_dtype",
                    f"{mask_dtype} holds {info.min}..{info.max}, but {name} needs label {value}; "
                    f"pass mask_dtype={smallest_dtype(values)!r} (or larger)",
                )
        mapping = _flip_map(num_classes, flip_pairs, flip_label_map)
        return cls(num_classes, ignore_index, fill, mask_dtype, mapping)

    @property
    def effective_fill(self) -> int | None:
        return self.ignore_index if self.fill is None else self.fill

    @property
    def extra(self) -> set[int]:
        """Labels allowed in any output besides the input's: the ignore index and the fill."""
        return {v for v in (self.ignore_index, self.effective_fill) if v is not None}

    def boundary_labels(self) -> list[int]:
        """Classes worth drawing on purpose: the ends of the range and where dtypes and floats lose integers."""
        n = self.num_classes
        special = [
            0,
            1,
            2,
            n - 2,
            n - 1,
            n // 2,
            127,
            128,
            255,
            256,
            257,
            258,
            2047,
            2048,
            2049,
            2**15 - 1,
            2**15,
            2**15 + 1,
            2**16 - 1,
            2**16,
            2**16 + 1,
            2**24 + 1,
            2**31 - 2,
        ]
        return sorted({v for v in special if 0 <= v < n})

    def apply_map(self, masks: np.ndarray, inverse: bool = False) -> np.ndarray:
        """``masks`` with the flip map (or its inverse) applied to every label."""
        out = masks.copy()
        for a, b in self.flip_map:
            src, dst = (b, a) if inverse else (a, b)
            out[masks == src] = dst
        return out


def _flip_map(
    num_classes: int, pairs: Iterable[tuple[int, int]] | None, mapping: Mapping[int, int] | None
) -> tuple[tuple[int, int], ...]:
    if pairs is not None and mapping is not None:
        raise _arg("flip_pairs", "pass flip_pairs or flip_label_map, not both")
    if pairs is not None:
        out: dict[int, int] = {}
        for pair in pairs:
            try:
                a, b = (int(v) for v in pair)
            except (TypeError, ValueError):
                raise _arg(
                    "flip_pairs", f"{pair!r} is not a pair of labels; write e.g. flip_pairs=[(4, 5), (6, 7)]"
                ) from None
            if a == b or a in out or b in out:
                raise _arg(
                    "flip_pairs",
                    f"label {a if a in out or a == b else b} is in more than one pair (or "
                    "paired with itself); each label swaps with exactly one other",
                )
            out[a], out[b] = b, a
        mapping = out
    if not mapping:
        return ()
    mapping = {int(k): int(v) for k, v in mapping.items()}
    name = "flip_label_map" if pairs is None else "flip_pairs"
    for k, v in mapping.items():
        for label in (k, v):
            if not 0 <= label < num_classes:
                raise _arg(name, f"label {label} is not a class (0..{num_classes - 1}); only classes can swap")
    if sorted(mapping) != sorted(mapping.values()):
        raise _arg(
            "flip_label_map",
            f"{mapping} is not a permutation: every label it maps to must also be mapped "
            "from (write both directions, {2: 3, 3: 2})",
        )
    return tuple(sorted((k, v) for k, v in mapping.items() if k != v))


# -- what lossy casts make of labels ------------------------------------------------------------


def lossy_casts(labels: np.ndarray) -> dict[str, np.ndarray]:
    """Each lossy cast's round trip of integer ``labels`` (int64 in, int64 out)."""
    labels = np.asarray(labels, np.int64)
    out = {"float16": labels.astype(np.float16).astype(np.int64)}
    try:
        import torch

        out["bfloat16"] = torch.from_numpy(labels).to(torch.bfloat16).to(torch.int64).numpy()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    for name in ("uint8", "int8", "int16", "uint16"):
        out[name] = labels.astype(name).astype(np.int64)
    return out


CAST_ADVICE = {
    "bfloat16": "bfloat16 holds integers exactly only up to 256",
    "float16": "float16 holds integers exactly only up to 2048",
    "uint8": "uint8 wraps labels modulo 256 (-100 becomes 156, 300 becomes 44)",
    "int8": "int8 wraps labels into -128..127",
    "int16": "int16 wraps labels into -32768..32767",
    "uint16": "uint16 wraps labels into 0..65535",
}


def explain_by_cast(label: int, sources: Iterable[int]) -> tuple[str, int] | None:
    """(cast, source label) if ``label`` is what a lossy cast makes of another of ``sources``, else None."""
    src = np.array(sorted(set(sources) - {label}), np.int64)
    if not len(src):
        return None
    for cast, out in lossy_casts(src).items():
        hit = np.flatnonzero(out == label)
        if len(hit):
            return cast, int(src[hit[0]])
    return None
