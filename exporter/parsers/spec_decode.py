"""Speculative decoding: V1 ``SpecDecoding metrics: ...`` and V0 ``Speculative metrics: ...``.

V1 (0.10.2+): ``Mean acceptance length: 5.90, Accepted throughput: 298.18 tokens/s, Drafted
throughput: 303.98 tokens/s, Accepted: 2982 tokens, Drafted: 3040 tokens, Per-position acceptance
rate: 1.000, 0.998, ..., Avg Draft acceptance rate: 98.1%``; 0.8.x put ``Draft acceptance rate: %``
first. Custom builds add segments (``Current speculative depth: 5``). V0 rates are fractions.

With dynamic draft lengths, vLLM's ``v1/spec_decode/metrics.py`` (``SpecDecodingLogging.log``) adds
``Draft length histogram: 0:12, 2:40, 4:448`` before the average rate: how many drafts of each
length the window held, lengths that did not occur left out. Every draft is counted, those of
length 0 too (the drafter chose not to propose), so the counts add up to the window's drafts: the
number the mean acceptance length and each per-position rate are divided by.

Diffusion language models (0.24+, the same ``v1/spec_decode/metrics.py``, each stats interval, at INFO or DEBUG
when idle): ``DiffusionDecoding metrics: Committed token throughput: 41.20 tokens/s, Mean denoising steps per
canvas: 8.00, Mean tokens committed per denoising step: 4.12, Committed: 412 tokens, Denoising steps: 100,
Canvas positions evaluated: 3200`` (``diffusion_decoding``: the window's counts and vLLM's means of them).
"""

from __future__ import annotations

import json
import re

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers._values import LIMIT, MAX_DIGITS, integer, number, number_list, percent, ratio, segments, snake
from exporter.parsers.base import INFO_LEVELS, Parser, where

_KNOWN = {
    "mean acceptance length": ("mean_acceptance_length", number),
    "current speculative depth": ("speculative_depth", integer),
    "accepted throughput": ("accepted_tokens_per_second", number),
    "drafted throughput": ("drafted_tokens_per_second", number),
    "accepted": ("accepted_tokens", integer),
    "drafted": ("drafted_tokens", integer),
    "avg draft acceptance rate": ("draft_acceptance_rate", ratio),
    "draft acceptance rate": ("draft_acceptance_rate", ratio),
    # V0 and the 0.8.2 nightly
    "system efficiency": ("system_efficiency", ratio),
    "number of speculative tokens": ("speculative_depth", integer),
    "number of accepted tokens": ("accepted_tokens", integer),
    "number of draft tokens": ("drafted_tokens", integer),
    "number of emitted tokens": ("emitted_tokens", integer),
}


# The 0.10.2+ line exactly (with the custom depth segment optional): one anchored match instead of
# the generic splitter. Anything else, or any value this does not read like the splitter would,
# goes the generic way; tests check both give the same fields. exporter.stream.fastpath matches it
# together with the line's wrapper (when the message starts with MARKER).
MARKER = "SpecDecoding metrics: "
_MARKERS = (MARKER, "Speculative metrics: ")
# (numbers of at most 18 digits before a point, exporter.parsers._values.MAX_DIGITS: a longer one goes
# the generic way, which leaves it out of the event)
CURRENT_PATTERN = (
    r"Mean acceptance length: (\d{1,18}\.\d+), (?:Current speculative depth: (\d{1,18}), )?"
    r"Accepted throughput: (\d{1,18}\.\d+) tokens/s, Drafted throughput: (\d{1,18}\.\d+) tokens/s, "
    r"Accepted: (\d{1,18}) tokens, Drafted: (\d{1,18}) tokens, "
    r"Per-position acceptance rate: ((?:\d\.\d+, )*\d\.\d+), "
    r"(?:Draft length histogram: ((?:\d{1,18}:\d{1,18}, )*\d{1,18}:\d{1,18}), )?"
    r"Avg Draft acceptance rate: (\d{1,18}\.\d+)%"
)
_CURRENT = re.compile(CURRENT_PATTERN)


def _rates(values) -> bool:
    """Per-position acceptance rates are shares of the drafts, each in [0, 1]: a list with any other
    number is no such list (it would make the accepted tokens at each position absurd)."""
    return all(isinstance(v, (int, float)) and 0.0 <= v <= 1.0 for v in values)


def current_fields(mean_len, depth, acc_tps, dra_tps, acc, dra, per_pos, histogram, rate) -> dict:
    """The fields of a CURRENT_PATTERN match, from its groups."""
    fields: dict = {"mean_acceptance_length": float(mean_len)}
    if depth is not None:
        fields["speculative_depth"] = int(depth)
    fields["accepted_tokens_per_second"] = float(acc_tps)
    fields["drafted_tokens_per_second"] = float(dra_tps)
    fields["accepted_tokens"] = int(acc)
    fields["drafted_tokens"] = int(dra)
    rates = list(map(float, per_pos.split(", ")))
    # (the pattern's rates are "d.ddd": none below 0, none NaN; _rates' other checks hold for them already)
    if max(rates) <= 1.0:
        fields["per_position_acceptance_rate"] = rates
    if histogram is not None:
        fields["draft_length_histogram"] = draft_lengths(histogram)
    fields["draft_acceptance_rate"] = percent(rate)
    return fields


def draft_lengths(text: str) -> dict[int, int] | None:
    """``0:12, 2:40, 4:448``: drafts of each length in the window (only lengths that occurred)."""
    out: dict[int, int] = {}
    for part in text.split(","):
        length, sep, count = part.strip().partition(":")
        if not sep or not length.isdigit() or not count.isdigit():
            return None
        if len(length) > MAX_DIGITS or len(count) > MAX_DIGITS:
            return None
        out[int(length)] = out.get(int(length), 0) + int(count)
    if any(n > LIMIT for n in out.values()):
        return None  # counts of one length that add up past any real window's
    return out or None


def _parse_current(body: str) -> dict | None:
    m = _CURRENT.fullmatch(body)
    return None if m is None else current_fields(*m.groups())


def _parse(frame: Frame) -> list[Event] | None:
    msg = frame.message
    for marker in _MARKERS:
        i = msg.find(marker)
        if i >= 0:
            body = msg[i + len(marker):]
            break
    else:
        return None
    fields = _parse_current(body)
    if fields is None:
        fields = parse_generic(body)
    if not fields:
        return None
    return [Event("spec_decode", fields)]


def parse_generic(body: str) -> dict:
    """Any spec-decode wording, segment by segment (every release, custom builds)."""
    fields: dict = {}
    for key, value in segments(body):
        k = key.lower()
        if k == "per-position acceptance rate":
            rates = number_list(value)
            if _rates(rates):
                fields["per_position_acceptance_rate"] = rates
            continue
        if k == "draft length histogram":
            hist = draft_lengths(value)
            if hist is not None:
                fields["draft_length_histogram"] = hist
            continue
        known = _KNOWN.get(k)
        if known:
            name, conv = known
            v = conv(value)
            if v is not None:
                fields[name] = v
            elif "nan" in value.lower():
                fields[name] = None  # vLLM prints nan% when nothing was drafted
        else:
            v = ratio(value) if value.endswith("%") else number(value)
            fields[snake(key)] = v if v is not None else value
    return fields


# Where vLLM prints it (the trust boundary): v1/spec_decode/metrics.py (V1; 0.8's stats logger), engine/metrics.py
# (V0), after the stats line, at its level; the marker first.
LOGGERS = ("metrics", "loggers")
PARSER = Parser("spec_decode", _MARKERS, _parse, where(
    INFO_LEVELS, LOGGERS, start=r"(?:Engine \d+: )?(?:SpecDecoding|Speculative) metrics: "))

# DSpark's calibration of its drafter's confidence, logged after each window's SpecDecoding line by
# the same SpecDecodingLogging.log (``_log_dspark_sts_calibration``): compact JSON with ``bins`` (10)
# and, per draft position, one row per field of ``bins`` numbers: ``counts`` (drafted tokens whose
# confidence fell in the bin), ``accepted`` (of those, accepted) and ``confidence_sums``.
CALIBRATION_MARKER = "DSpark STS calibration bins: "


def _parse_calibration(frame: Frame) -> list[Event] | None:
    msg = frame.message
    i = msg.find(CALIBRATION_MARKER)
    if i < 0:
        return None
    try:
        payload = json.loads(msg[i + len(CALIBRATION_MARKER):])
    except ValueError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("bins"), int):
        return None
    fields: dict = {"bins": payload["bins"]}
    for name in ("counts", "accepted", "confidence_sums"):
        rows = payload.get(name)
        if not isinstance(rows, list) or not all(
                isinstance(r, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in r)
                for r in rows):
            return None
        fields[name] = rows
    return [Event("spec_calibration", fields)]


CALIBRATION = Parser("spec_calibration", (CALIBRATION_MARKER,), _parse_calibration, where(
    INFO_LEVELS, LOGGERS, start=CALIBRATION_MARKER))


def drafts_of(fields: dict) -> int | None:
    """The drafts a window's line stands for (vLLM's num_drafts: one per request per step), which it
    does not print. vLLM computes the mean acceptance length as 1 + accepted / drafts and each
    per-position rate as accepted-at-that-position / drafts (v1/spec_decode/metrics.py), so
    drafts = accepted / (sum of the per-position rates): printed to 3 decimals, closer than the
    mean length's 2. A window that accepted nothing: drafted tokens / the configured depth. With a
    draft length histogram, the drafts are its sum, exactly."""
    hist = fields.get("draft_length_histogram")
    if isinstance(hist, dict) and hist:
        return sum(hist.values())
    accepted = fields.get("accepted_tokens")
    per_pos = fields.get("per_position_acceptance_rate") or ()
    if accepted:
        try:
            rates = sum(per_pos)  # floats from the parser; anything else falls to the mean length
        except TypeError:
            rates = 0
        if rates > 0:
            return round(accepted / rates)
        mean = fields.get("mean_acceptance_length")
        if isinstance(mean, (int, float)) and mean > 1:
            return round(accepted / (mean - 1))
        return None
    drafted = fields.get("drafted_tokens")
    if drafted == 0 or accepted == 0 and not drafted:
        return 0
    depth = fields.get("speculative_depth") or len(per_pos)
    return round(drafted / depth) if drafted and depth else None


# Diffusion decoding (0.24+): the window's counts, and vLLM's own means of them
DIFFUSION_MARKER = "DiffusionDecoding metrics: "
_DIFFUSION = re.compile(
    r"Committed token throughput: ([\d.]+) tokens/s, Mean denoising steps per canvas: ([\d.]+|nan), Mean tokens "
    r"committed per denoising step: ([\d.]+|nan), Committed: (\d+) tokens, Denoising steps: (\d+), Canvas positions "
    r"evaluated: (\d+)")


def _parse_diffusion(frame: Frame) -> list[Event] | None:
    msg = frame.message
    i = msg.find(DIFFUSION_MARKER)
    if i < 0:
        return None
    m = _DIFFUSION.match(msg, i + len(DIFFUSION_MARKER))
    if m is None:
        return None
    fields: dict = {"committed_tokens_per_second": float(m.group(1)), "committed_tokens": int(m.group(4)),
                    "denoising_steps": int(m.group(5)), "canvas_positions": int(m.group(6))}
    for name, v in (("mean_steps_per_canvas", m.group(2)), ("mean_tokens_per_step", m.group(3))):
        if v != "nan":
            fields[name] = float(v)
    return [Event("diffusion_decoding", fields)]


DIFFUSION = Parser("diffusion_decoding", (DIFFUSION_MARKER,), _parse_diffusion, where(
    INFO_LEVELS, LOGGERS, start=r"(?:Engine \d+: )?DiffusionDecoding metrics: "))
