"""Value helpers shared by the parsers: numbers, ratios, sizes, and `Key: value` segments."""

from __future__ import annotations

import math
import re

_NUM = re.compile(r"[-+]?(?:\d[\d,]*)?\.?\d+(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.I)
_KEY_START = re.compile(r"(?:^|, )([A-Za-z][A-Za-z0-9 ()/#_.+-]*?): ")
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
    if head and "_" not in head and "," not in head:
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
    (``Per-position acceptance rate: 1.000, 0.998``) stay in one value.
    """
    out: list[tuple[str, str]] = []
    matches = list(_KEY_START.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out.append((m.group(1), text[m.end():end].strip().rstrip(".,").strip()))
    return out


def number_list(text: str) -> list[float]:
    out = []
    for part in text.split(","):
        v = number(part)
        if v is not None:
            out.append(v)
    return out
