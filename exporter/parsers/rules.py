"""A user's rules as parsers: a frame in, a ``rule`` event out (the rule's name and its fields, in base
units). The rules themselves are read and checked by exporter.config.rules; this module only takes the
checked specs (their attributes: name, regex, needles, fields, loggers, levels, processes, client_text,
max_chars), so parsing stays pure and imports nothing of config.

Where a rule may match (its origin): a frame must come from one of the rule's logger files, levels and
process tags when the rule names them; and, unless the rule says ``client_text: true``, it must not be
a record that echoes a client's text: the same trust boundary as the built-in families (issue 32,
exporter.parsers.echo: the request logger's records, the engine client's request lines, run-time LoRA
names, the response-body middleware). Otherwise a prompt that quotes a line would count as that line.
The pipeline keeps such records (and their continuation lines, and a JSON record's later message lines)
from every rule but those with ``client_text: true`` (``Families.rule_events(frame, echo=True)``); a
rule's own check here (``echo.recognise``) holds when a frame reaches it another way. uvicorn's lines (the access
log: a client's path) are never a rule's: they are the access-log family's, and the batch path counts them without
framing; so is any line that family reads, framed uvicorn's or not (a wrapper that lost the record's start).
"""

from __future__ import annotations

import math
import re
from fnmatch import fnmatchcase

from exporter.framing.frame import Frame
from exporter.parsers import access_log, echo
from exporter.parsers.base import Parser
from exporter.parsers.events import Event

MAX_STRING = 200  # a string field's value is cut here (a label's value is bounded again by its rule)
_INT = re.compile(r"[+-]?\d{1,30}")

def echoes_client_text(f: Frame) -> bool:
    """A record that quotes what a client sent (or what the model wrote for it): exporter.parsers.echo's
    (uvicorn's lines, which carry a client's path, are refused apart)."""
    return echo.recognise(f) is not None


def number(text: str, kind: str):
    """``text`` as an int or a finite float (thousands separators allowed), or None."""
    t = text.strip().replace(",", "").replace("_", "")
    if kind == "int":
        return int(t) if _INT.fullmatch(t) else None
    if len(t) > 64:
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def line_value(value, fields: dict) -> float | None:
    """The number one matched line gives a rule's series: 1 (``value`` unset: one per line), the named
    field's value, or a constant; None when the line did not carry that field. Shared by /metrics
    (exporter.metrics.rules) and the report (exporter.offline.report.rules), so the two agree."""
    if value is None:
        return 1.0
    if isinstance(value, str):
        x = fields.get(value)
        return None if x is None else float(x)
    return float(value)


def _origin_check(spec):
    """A function frame -> bool: whether the frame comes from where the rule accepts lines."""
    levels = frozenset(spec.levels)
    files = tuple(lg for lg in spec.loggers if ":" not in lg)
    exact = frozenset(lg for lg in spec.loggers if ":" in lg)
    processes = spec.processes
    client_text = spec.client_text

    def ok(f: Frame) -> bool:
        if f.uvicorn:
            return False
        if levels and f.level not in levels:
            return False
        if exact or files:
            lg = f.logger
            if lg is None or not (lg in exact or lg.partition(":")[0] in files):
                return False
        if processes:
            proc = f.process
            if proc is None or not any(fnmatchcase(proc, p) for p in processes):
                return False
        return client_text or not echoes_client_text(f)

    return ok


def refusal(spec, f: Frame) -> str | None:
    """Why the rule does not take the frame because of where it comes from, in words (None: it may); what
    ``vllm-log-exporter test`` says when a rule's pattern matches a line the rule refused."""
    if f.uvicorn or access_log.from_uvicorn(f) is not None:
        return "it is an access-log line (uvicorn's, a client's path), which no rule reads"
    if spec.levels and f.level not in spec.levels:
        return f"its level {f.level or '(none)'} is not {' or '.join(spec.levels)}"
    if spec.loggers:
        lg = f.logger
        if lg is None or not any(lg == want or (":" not in want and lg.partition(":")[0] == want)
                                 for want in spec.loggers):
            return f"its logger {lg or '(none)'} is not {' or '.join(spec.loggers)}"
    if spec.processes:
        if f.process is None or not any(fnmatchcase(f.process, p) for p in spec.processes):
            return f"its process {f.process or '(none)'} is not {' or '.join(spec.processes)}"
    if not spec.client_text and echoes_client_text(f):
        return ("it echoes a client's text (vLLM's request logger, a request's id, a LoRA name or a response body); "
                "client_text: true lets the rule read it")
    return None


def _converter(spec):
    """A function match -> (fields, names of fields whose text was no number)."""
    plan = []
    for fs in spec.fields:
        units = dict(fs.units) if fs.unit_from else None
        plan.append((fs.name, fs.type, fs.scale, fs.unit_from, units))

    def convert(m: re.Match) -> tuple[dict, list[str]]:
        out: dict = {}
        invalid: list[str] = []
        for name, kind, scale, unit_from, units in plan:
            text = m.group(name)
            if text is None:  # the line did not say it: the field is absent, not zero
                continue
            if kind == "string":
                out[name] = text[:MAX_STRING]
                continue
            v = number(text, kind)
            if unit_from is not None:
                unit = m.group(unit_from)
                if unit is not None:
                    scale = units.get(unit.strip())
                    if scale is None:
                        v = None
            if v is None:
                invalid.append(name)
                continue
            out[name] = v * scale if scale != 1 else v
        return out, invalid

    return convert


def rule_parser(spec) -> Parser:
    """The parser of one rule: its needles first (the pipeline's prefilter), then where the frame comes from,
    then the pattern over at most ``max_chars`` of the message."""
    search = spec.regex.search
    limit = spec.max_chars
    origin = _origin_check(spec)
    convert = _converter(spec)
    name = spec.name

    def parse(f: Frame) -> list[Event] | None:
        if not origin(f):
            return None
        m = search(f.message, 0, limit)
        if m is None:
            return None
        values, invalid = convert(m)
        fields = {"rule": name, **values}
        if invalid:
            fields["_invalid"] = invalid
        return [Event("rule", fields)]

    return Parser("rule:" + name, tuple(spec.needles), parse)


def families(specs):
    """The built-in families with ``specs``' rules after them, for a stream's Pipeline."""
    from exporter.parsers import BUILT_IN, Families

    if not specs:
        return BUILT_IN
    return Families(tuple(rule_parser(s) for s in specs), tuple(tuple(s.loggers) for s in specs),
                    tuple(bool(s.client_text) for s in specs), tuple(tuple(s.levels) for s in specs))
