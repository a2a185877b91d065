"""Value helpers shared by the parsers: numbers, ratios, sizes, and `Key: value` segments."""

from __future__ import annotations

import math
import re

_NUM = re.compile(r"[-+]?(?:\d[\d,]*)?\.?\d+(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.I)
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9 ()/#_.+-]*")
_SNAKE = re.compile(r"[^a-z0-9]+")

UNITS = {
    "b": 1,
    "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def number(text: str) -> float | None:
    """First number in ``text`` (thousands separators allowed); None for nan/inf or no number."""
    # Most values are a plain number and a unit ("359.0 tokens/s", "98.1%", "1.09x"): try that first.
    parts = text.split(None, 1)
    head = parts[0].rstrip("%x") if parts else ""
    e = head.lower().find("e")
    if head and "_" not in head and "," not in head and (e < 0 or (e > 0 and head[e - 1].isdigit())):
        try:
            v = float(head)
        except ValueError:
            pass
        else:
            return v if math.isfinite(v) else None
    m = _NUM.search(text)
    if not m:
        return None
    try:
        v = float(m.group(0).replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def integer(text: str) -> int | None:
    v = number(text)
    return None if v is None else int(v)


class _Percents(dict):
    """Percentages by their text, computed on a miss; bounded, so odd values cannot grow it."""

    def __missing__(self, text: str) -> float:
        if len(self) >= 4096:
            self.clear()
        v = self[text] = round(float(text) / 100.0, 10)
        return v


# ``"98.1"`` (a number logged before ``%``) -> 0.981, as ``ratio`` gives it. A log repeats the same
# few hundred percentages and this rounding is one of a stats line's dearer steps, so it is memoised;
# as the dict's own lookup, a hit runs no Python code at all.
percent = _Percents().__getitem__


def ratio(text: str) -> float | None:
    """``98.1%`` -> 0.981, ``0.642`` -> 0.642 (V0 and per-position rates are already fractions)."""
    v = number(text)
    if v is None:
        return None
    # Rounded so that "88.1%" is 0.881 and not 0.8809999999999999.
    return round(v / 100.0, 10) if "%" in text else v


def to_bytes(value: float | None, unit: str) -> float | None:
    if value is None:
        return None
    return float(round(value * UNITS.get(unit.lower(), 1)))


def snake(key: str) -> str:
    return _SNAKE.sub("_", key.lower()).strip("_")


def segments(text: str) -> list[tuple[str, str]]:
    """Split ``Key: value, Other key: value`` by key, never by position.

    A value runs until the next ``, Key: `` whose key starts with a letter, so lists of numbers
    (``Per-position acceptance rate: 1.000, 0.998``) stay in one value. (Split and partition, not a
    regex scan: these lines come every few seconds per engine and the scan was their largest cost.)
    """
    out: list[list[str]] = []
    for part in text.split(", "):
        key, sep, value = part.partition(": ")
        if sep and _KEY.fullmatch(key):
            out.append([key, value])
        elif out:
            out[-1][1] += ", " + part
    return [(k, v.strip().rstrip(".,").strip()) for k, v in out]


def number_list(text: str) -> list[float]:
    out = []
    for part in text.split(","):
        v = number(part)
        if v is not None:
            out.append(v)
    return out
