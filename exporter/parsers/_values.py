"""Value helpers shared by the parsers: numbers, ratios, sizes, and `Key: value` segments."""

from __future__ import annotations

import ast
import math
import re
import warnings

_NUM = re.compile(r"[-+]?(?:\d[\d,]*)?\.?\d+(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.I)
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9 ()/#_.+-]*")
_SNAKE = re.compile(r"[^a-z0-9]+")

UNITS = {
    "b": 1,
    "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


# No number a vLLM log states is this large (an exabyte, 10^18 tokens or seconds): a field beyond it
# is a forged or garbled line, and is left out of the event (absent, not a huge or infinite value
# that would turn a counter into +Inf). Checked once per event, by parse_frame; the fast path's
# patterns take at most MAX_DIGITS digits before a decimal point, so they never make one.
LIMIT = 1e18
MAX_DIGITS = 18


# A run of digits longer than any number vLLM prints. Searching text for a pattern that starts with
# \d+ tries every digit of such a run as a start and reads the run to its end each time: 5,000 digits
# cost one line 13 s of regex work. parse_frame squeezes such runs first (squeeze_digits) in a
# message long enough to hold one that costs anything.
LONG_RUN = 32
SQUEEZE_FROM_CHARS = 256  # a shorter message holds no run that costs more than ~30 ms
_LONG_RUN = re.compile(r"\d{%d,}" % (LONG_RUN + 1))


def _squeeze(m: re.Match) -> str:
    run = m.group(0)
    if m.start() and m.string[m.start() - 1] == ".":
        return run[:LONG_RUN]  # a fraction's digits: the first ones are its value
    run = run.lstrip("0") or "0"  # leading zeros say nothing ("0" * 5000 + "1" is 1)
    # still longer: a number past LIMIT, kept as one (so the line's pattern still matches and its
    # other facts count) but short; bounded() leaves it out of the event
    return run if len(run) <= LONG_RUN else run[:LONG_RUN + 1]


def squeeze_digits(text: str) -> str:
    """``text`` with every run of more than LONG_RUN digits made short: the same value when leading
    zeros were all that made it long, else a number still past LIMIT (a fraction keeps its first
    digits)."""
    return _LONG_RUN.sub(_squeeze, text)


def has_long_run(text: str) -> bool:
    return len(text) > SQUEEZE_FROM_CHARS and _LONG_RUN.search(text) is not None


def bounded(fields: dict) -> dict:
    """``fields`` without the numbers past +-LIMIT or not finite (in lists and dicts too: a list
    holding one goes whole, a dict loses that key). The same dict, changed in place."""
    bad = None
    for k, v in fields.items():
        t = type(v)
        if t is float or t is int:
            if not -LIMIT <= v <= LIMIT:  # (NaN fails too)
                bad = [k] if bad is None else bad + [k]
        elif t is list or t is tuple:
            if not _all_bounded(v):
                bad = [k] if bad is None else bad + [k]
        elif t is dict:
            bounded(v)
    if bad is not None:
        for k in bad:
            del fields[k]
    return fields


def _all_bounded(values) -> bool:
    for x in values:
        t = type(x)
        if t is float or t is int:
            if not -LIMIT <= x <= LIMIT:
                return False
        elif t is list or t is tuple:
            if not _all_bounded(x):
                return False
        elif t is dict and len(bounded(x)) != len(x):
            return False
    return True


def literal_eval(text: str):
    """ast.literal_eval without its SyntaxWarning ("invalid decimal literal" on text like "1e5x"): a
    line is never the exporter's own warning on stderr. Raises what literal_eval raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.literal_eval(text)


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
