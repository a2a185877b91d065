"""A user's own line families ("rules"): read from the config file (``rules:``, ``rule_files:``) or a rules
file, every key checked, every mistake a one-line error naming the rule and the key. What a rule does
with a line is exporter.parsers.rules (the match) and exporter.metrics.rules (the series).

```yaml
rules:
  - name: offload_region                 # [a-z][a-z0-9_]*: the `rule` label, the report's section
    help: The shared KV-offload region the workers map (Gilded Gnosis builds)
    pattern: 'Created mmap file \\S+ \\((?P<size>[\\d.]+) GB\\)'   # Python regex, searched in the message
    needle: Created mmap file            # optional: a literal every matching line holds (derived if left out)
    logger: shared_offload_region.py     # optional: the vLLM logger file (file.py or file.py:LINE), or a list
    level: INFO                          # optional: DEBUG | INFO | WARNING | ERROR | CRITICAL, or a list
    process: Worker_TP*                  # optional: the process tag, a glob, or a list
    client_text: false                   # true: may match records that echo a client's text (exporter.parsers.echo)
    max_chars: 2048                      # how much of the message the pattern sees (64-16384)
    fields:                              # the pattern's named groups; one left out is a string
      size: {type: float, unit: GB}      # int | float | string; unit converts to the base unit
    metrics:
      - name: custom_offload_region_bytes
        type: gauge                      # counter | gauge | histogram
        value: size                      # a field, or a number; counters: left out = 1 per line
        help: Size of the shared KV-offload region.
        labels:                          # label name -> its field and its bound (values or max_values)
          worker: {field: proc, max_values: 8}
        buckets: [1e9, 4e9, 16e9]        # histogram: upper bounds in the base unit (default by unit)
        better: higher                   # report's "best": higher (default) or lower
rule_files: [/etc/vllm-log-exporter/custom-build.rules.yaml]   # files holding `rules:` lists (relative: to this file)
```

Metric names follow Prometheus: counters end in ``_total``, a field with a unit ends the name in its base
unit (``_bytes``, ``_seconds``, ``_ratio``, ``_bytes_per_second``), no other unit word ends a name, and
``vllm_log_*`` (ours), ``process_*`` and ``python_*`` (the exporter's own process) are taken. Every label
has a bound; values beyond it are ``other`` and counted in vllm_log_rule_label_overflow_total.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any

from exporter.config import regex_check, rule_regex
from exporter.config.settings import ConfigError
from exporter.config.yaml_file import load_yaml

MAX_RULES = 256
MAX_METRICS = 16
MAX_PATTERN = 2000
MAX_LABEL_VALUES = 100
MAX_SERIES = 1000  # per metric and server: the product of its labels' bounds (each + `other`)
MAX_BUCKETS = 40
DEFAULT_MAX_CHARS = 2048
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TYPES = ("counter", "gauge", "histogram")
FIELD_TYPES = ("int", "float", "string")

# unit -> factor to the base unit, by what the base unit is
UNITS: dict[str, dict[str, float]] = {
    "bytes": {"B": 1, "byte": 1, "bytes": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
              "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3, "TiB": 1024.0 ** 4},
    "seconds": {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "sec": 1, "second": 1, "seconds": 1,
                "min": 60, "h": 3600},
    "ratio": {"%": 0.01, "percent": 0.01, "ratio": 1},
    "bytes_per_second": {"B/s": 1, "kB/s": 1e3, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
                         "KiB/s": 1024.0, "MiB/s": 1024.0 ** 2, "GiB/s": 1024.0 ** 3},
}
BASE_SUFFIX = {"bytes": "_bytes", "seconds": "_seconds", "ratio": "_ratio", "bytes_per_second": "_bytes_per_second"}
# unit words Prometheus replaces by a base unit: a name ending so is refused with the base unit to use
_NON_BASE = {"_milliseconds": "seconds", "_microseconds": "seconds", "_nanoseconds": "seconds", "_minutes": "seconds",
             "_hours": "seconds", "_days": "seconds", "_ms": "seconds", "_us": "seconds", "_ns": "seconds",
             "_kilobytes": "bytes", "_megabytes": "bytes", "_gigabytes": "bytes", "_terabytes": "bytes", "_kb": "bytes",
             "_mb": "bytes", "_gb": "bytes", "_tb": "bytes", "_kib": "bytes", "_mib": "bytes", "_gib": "bytes",
             "_tib": "bytes", "_bits": "bytes", "_percent": "ratio", "_pct": "ratio", "_percentage": "ratio"}
# histogram buckets when none are given: by the base unit
DEFAULT_BUCKETS = {
    "seconds": (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    "bytes": tuple(float(4 ** k * 1024) for k in range(13)),  # 1 KiB .. 16 GiB, x4
    "ratio": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0),
    "bytes_per_second": tuple(float(10 ** k) for k in range(3, 13)),  # 1 kB/s .. 1 TB/s
    None: (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000, 1000000),
}
TAKEN_PREFIXES = ("vllm_log_", "process_", "python_", "__")
RESERVED_LABELS = ("server", "rule", "le", "quantile", "job", "instance", "host", "cluster")
RESERVED_FIELDS = ("rule",)
OTHER = "other"

_RULE_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
_METRIC_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,127}")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,63}")
_LOGGER = re.compile(r"[\w.-]{1,128}(?::\d{1,6})?")

_RULE_KEYS = {"name", "help", "pattern", "needle", "logger", "level", "process", "client_text", "max_chars", "fields",
              "metrics"}
_FIELD_KEYS = {"type", "unit", "unit_from"}
_METRIC_KEYS = {"name", "type", "value", "help", "labels", "buckets", "better"}
_LABEL_KEYS = {"field", "values", "max_values"}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str  # int | float | string
    dimension: str | None = None  # a key of UNITS, or None: a plain number (or a string)
    scale: float = 1.0  # the declared unit's factor to the base unit
    unit: str | None = None
    unit_from: str | None = None  # a string field holding the unit as the line prints it
    units: tuple[tuple[str, float], ...] = ()  # with unit_from: the units of the dimension and their factors


@dataclass(frozen=True)
class LabelSpec:
    name: str
    field: str
    values: tuple[str, ...] | None = None  # kept as they are; any other value is `other`
    max_values: int | None = None  # the first N distinct values seen (per server) are kept


@dataclass(frozen=True)
class MetricSpec:
    name: str  # as it appears in /metrics (a counter's with _total)
    type: str
    value: str | float | None  # a field's name, a constant, or None (a counter's 1 per line)
    help: str
    labels: tuple[LabelSpec, ...] = ()
    buckets: tuple[float, ...] | None = None
    better: str = "higher"
    dimension: str | None = None

    @property
    def family(self) -> str:
        """The name without _total (what a counter family is declared with)."""
        return self.name[:-len("_total")] if self.type == "counter" else self.name

    def shape(self) -> tuple:
        """What must agree for two rules to feed one metric, or for a reload to keep its series."""
        return (self.type, tuple(label.name for label in self.labels), self.buckets)


@dataclass(frozen=True)
class RuleSpec:
    name: str
    pattern: str
    regex: re.Pattern
    needles: tuple[str, ...]
    fields: tuple[FieldSpec, ...]
    metrics: tuple[MetricSpec, ...]
    help: str = ""
    loggers: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()
    processes: tuple[str, ...] = ()
    client_text: bool = False
    max_chars: int = DEFAULT_MAX_CHARS
    where: str = ""  # "FILE: rules[N]", for messages about the rule
    engine: str = "re"  # what matches it (exporter.config.rule_regex): RE2 past 512 characters, or "re"

    def field(self, name: str) -> FieldSpec | None:
        return next((f for f in self.fields if f.name == name), None)


def _err(where: str, msg: str) -> ConfigError:
    return ConfigError(f"{where}: {msg}")


def _keys(mapping: Any, allowed: set[str], where: str) -> dict:
    if not isinstance(mapping, dict):
        raise _err(where, f"expected a mapping, got {type(mapping).__name__}")
    for k in mapping:
        if k not in allowed:
            raise _err(f"{where}.{k}", f"unknown key (expected one of: {', '.join(sorted(allowed))})")
    return mapping


def _strings(value: Any, where: str) -> tuple[str, ...]:
    """One string or a list of them."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v for v in items):
        raise _err(where, "expected a string or a list of strings")
    return tuple(items)


def _unit(unit: Any, where: str) -> tuple[str, float]:
    if not isinstance(unit, str):
        raise _err(where, f"expected a unit (e.g. GB, ms, %), got {unit!r}")
    for dimension, units in UNITS.items():
        if unit in units:
            return dimension, units[unit]
    known = ", ".join(u for units in UNITS.values() for u in units)
    raise _err(where, f"unknown unit {unit!r} (known: {known})")


def _fields(raw: Any, groups: set[str], where: str) -> dict[str, FieldSpec]:
    out: dict[str, FieldSpec] = {}
    for name in sorted(groups):
        if name in RESERVED_FIELDS:
            raise _err(f"{where}.pattern", f"group name {name!r} is reserved")
        out[name] = FieldSpec(name, "string")
    if raw is None:
        return out
    if not isinstance(raw, dict):
        raise _err(f"{where}.fields", "expected a mapping of field name to its type and unit")
    for name, spec in raw.items():
        w = f"{where}.fields.{name}"
        if name not in groups:
            raise _err(w, f"unknown field: the pattern has no group (?P<{name}>...) "
                          f"(its groups: {', '.join(sorted(groups)) or 'none'})")
        if isinstance(spec, str):
            spec = {"type": spec}
        spec = _keys(spec, _FIELD_KEYS, w)
        ftype = spec.get("type", "float" if "unit" in spec else "string")
        if ftype not in FIELD_TYPES:
            raise _err(f"{w}.type", f"{ftype!r} is not one of {', '.join(FIELD_TYPES)}")
        dimension, scale, unit = None, 1.0, None
        if "unit" in spec:
            if ftype == "string":
                raise _err(f"{w}.unit", "a string field has no unit (give type: int or float)")
            unit = spec["unit"]
            dimension, scale = _unit(unit, f"{w}.unit")
        unit_from = spec.get("unit_from")
        if unit_from is not None:
            if unit is None:
                raise _err(f"{w}.unit_from", "needs unit: too (the dimension, and the unit when the line gives none)")
            if unit_from not in groups or unit_from == name:
                raise _err(f"{w}.unit_from", f"unknown field {unit_from!r}: name another group of the pattern")
        units = tuple(UNITS[dimension].items()) if unit_from else ()
        out[name] = FieldSpec(name, ftype, dimension, scale, unit, unit_from, units)
    for f in out.values():
        if f.unit_from and out[f.unit_from].type != "string":
            raise _err(f"{where}.fields.{f.unit_from}", f"holds {f.name}'s unit: it must be a string field")
    return out


def _labels(raw: Any, fields: dict[str, FieldSpec], where: str) -> tuple[LabelSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise _err(where, "expected a mapping of label name to {field, values or max_values}")
    out = []
    series = 1
    for name, spec in raw.items():
        w = f"{where}.{name}"
        if not isinstance(name, str) or not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise _err(w, f"{name!r} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)")
        if name in RESERVED_LABELS:
            raise _err(w, f"{name!r} is taken (by the exporter or Prometheus: {', '.join(RESERVED_LABELS)})")
        spec = _keys(spec if spec is not None else {}, _LABEL_KEYS, w)
        field = spec.get("field", name)
        if field not in fields:
            raise _err(f"{w}.field", f"unknown field {field!r} (fields: {', '.join(sorted(fields)) or 'none'})")
        if fields[field].type == "float":
            raise _err(f"{w}.field", f"{field!r} is a float: every new value would be a new series; use an int or "
                                     "string field")
        values, cap = spec.get("values"), spec.get("max_values")
        if (values is None) == (cap is None):
            raise _err(w, "no bound: give values: [...] (the values kept) or max_values: N (the first N seen are "
                          "kept); the rest are counted as `other`" if values is None else
                          "give values or max_values, not both")
        if values is not None:
            if not isinstance(values, list) or not values or len(values) > MAX_LABEL_VALUES \
                    or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in values):
                raise _err(f"{w}.values", f"expected a list of 1-{MAX_LABEL_VALUES} strings")
            values = tuple(dict.fromkeys(str(v) for v in values))
            if OTHER in values:
                raise _err(f"{w}.values", "'other' is what values beyond the bound become; leave it out")
            bound = len(values)
        else:
            if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_LABEL_VALUES:
                raise _err(f"{w}.max_values", f"expected a whole number in [1, {MAX_LABEL_VALUES}]")
            bound = cap
        series *= bound + 1
        out.append(LabelSpec(name, field, values, cap))
    if series > MAX_SERIES:
        raise _err(where, f"up to {series} series per server (each label's bound + other, multiplied); at most "
                          f"{MAX_SERIES}: lower a bound or drop a label")
    return tuple(out)


def _buckets(raw: Any, dimension: str | None, where: str) -> tuple[float, ...]:
    if raw is None:
        return tuple(float(b) for b in DEFAULT_BUCKETS[dimension])
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_BUCKETS \
            or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in raw):
        raise _err(where, f"expected a list of 1-{MAX_BUCKETS} finite numbers (upper bounds, in the base unit)")
    out = tuple(float(b) for b in raw)
    if any(b >= c for b, c in zip(out, out[1:])):
        raise _err(where, "upper bounds must increase")
    return out


def _metric(raw: Any, rule: str, fields: dict[str, FieldSpec], rule_help: str, where: str) -> MetricSpec:
    m = _keys(raw, _METRIC_KEYS, where)
    name = m.get("name")
    if not isinstance(name, str) or not _METRIC_NAME.fullmatch(name):
        raise _err(f"{where}.name", f"{name!r} is not a metric name ([a-zA-Z_][a-zA-Z0-9_]*; no colons: those are "
                                    "for recording rules)")
    if name.startswith(TAKEN_PREFIXES):
        raise _err(f"{where}.name", f"{name!r}: names starting {', '.join(TAKEN_PREFIXES)} are the exporter's own; "
                                    "choose your own prefix (e.g. your build's name)")
    mtype = m.get("type")
    if mtype not in TYPES:
        raise _err(f"{where}.type", f"{mtype!r} is not one of {', '.join(TYPES)}")
    base = name
    if mtype == "counter":
        if not name.endswith("_total"):
            raise _err(f"{where}.name", f"{name!r}: a counter's name ends in _total")
        base = name[:-len("_total")]
    else:
        for suffix in ("_total", "_count", "_sum", "_bucket", "_created"):
            if name.endswith(suffix):
                raise _err(f"{where}.name", f"{name!r}: only a counter's name ends in _total" if suffix == "_total"
                           else f"{name!r}: {suffix} is what Prometheus adds to histograms and counters")
    for word, dim in _NON_BASE.items():
        if base.endswith(word):
            raise _err(f"{where}.name", f"{name!r} names a unit Prometheus does not use ({word[1:]}): values are "
                                        f"kept in {dim}; give the field its unit (e.g. unit: ms) and end the name "
                                        f"in {BASE_SUFFIX[dim]}")
    value = m.get("value")
    dimension = None
    if isinstance(value, str):
        f = fields.get(value)
        if f is None:
            raise _err(f"{where}.value", f"unknown field {value!r} (fields: {', '.join(sorted(fields)) or 'none'})")
        if f.type == "string":
            raise _err(f"{where}.value", f"{value!r} is a string field: give it type: int or float")
        dimension = f.dimension
    elif value is None:
        if mtype != "counter":
            raise _err(f"{where}.value", f"a {mtype} needs a value: a field (or a number)")
        value = None
    elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _err(f"{where}.value", f"expected a field name or a number, got {value!r}")
    else:
        if mtype == "histogram":
            raise _err(f"{where}.value", "a histogram observes a field, not a constant")
        if mtype == "counter" and value < 0:
            raise _err(f"{where}.value", "a counter only goes up: give a number >= 0")
        value = float(value)
    if dimension is not None:
        if mtype == "counter" and dimension == "ratio":
            raise _err(f"{where}.value", "a ratio is not something to add up: use a gauge or a histogram")
        if not base.endswith(BASE_SUFFIX[dimension]):
            raise _err(f"{where}.name", f"{name!r}: its value is in {dimension}, so the name ends in "
                                        f"{BASE_SUFFIX[dimension]}{'_total' if mtype == 'counter' else ''}")
    else:
        for dim, suffix in BASE_SUFFIX.items():
            if base.endswith(suffix) and not (dim == "bytes" and base.endswith("_bytes_per_second")):
                raise _err(f"{where}.name", f"{name!r} ends in {suffix} but its value has no unit: give the "
                                            f"field a unit ({', '.join(list(UNITS[dim])[:4])}...)")
    labels = _labels(m.get("labels"), fields, f"{where}.labels")
    if mtype == "gauge" and name.endswith("_info") and value != 1.0:
        raise _err(f"{where}.value", "an _info gauge reads 1 (value: 1); its facts are in its labels")
    buckets = None
    if mtype == "histogram":
        buckets = _buckets(m.get("buckets"), dimension, f"{where}.buckets")
    elif "buckets" in m:
        raise _err(f"{where}.buckets", "only a histogram has buckets")
    better = m.get("better", "higher")
    if better not in ("higher", "lower"):
        raise _err(f"{where}.better", f"{better!r} is not higher or lower")
    doc = m.get("help")
    if doc is not None and (not isinstance(doc, str) or not doc.strip() or len(doc) > 500):
        raise _err(f"{where}.help", "expected a sentence (up to 500 characters)")
    if doc is None:
        if value is None:
            what = f"Lines matched by rule {rule}"
        elif isinstance(value, str):
            what = f"Field {value} of rule {rule}'s lines" + (f", in {dimension}" if dimension else "")
        else:
            what = f"{value:g} for each label set rule {rule}'s lines gave"
        doc = f"{rule_help.rstrip('.')}. {what}." if rule_help else f"{what}."
    return MetricSpec(name, mtype, value, doc.strip(), labels, buckets, better, dimension)


def load_rule(raw: Any, where: str) -> RuleSpec:
    """One rule from its mapping; ``where`` is e.g. ``c.yaml: rules[2]``."""
    if not isinstance(raw, dict):
        raise _err(where, f"expected a mapping (a rule), got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not _RULE_NAME.fullmatch(name):
        raise _err(f"{where}.name", f"{name!r} must be 1-63 of a-z, 0-9, _ starting with a letter")
    where = f"{where} ({name})"
    r = _keys(raw, _RULE_KEYS, where)
    doc = r.get("help", "")
    if not isinstance(doc, str) or len(doc) > 500:
        raise _err(f"{where}.help", "expected a sentence (up to 500 characters)")
    pattern = r.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise _err(f"{where}.pattern", "required: a Python regular expression searched in the message")
    if len(pattern) > MAX_PATTERN:
        raise _err(f"{where}.pattern", f"longer than {MAX_PATTERN} characters")
    try:
        regex = re.compile(pattern)
    except re.error as e:
        at = f" at position {e.pos}" if e.pos is not None else ""
        raise _err(f"{where}.pattern", f"invalid: {e.msg}{at}") from None
    try:
        regex_check.check(pattern)
    except regex_check.Unsafe as e:
        raise _err(f"{where}.pattern", f"may backtrack catastrophically: {e}") from None
    if regex.flags & re.IGNORECASE:
        raise _err(f"{where}.pattern", "(?i) is not allowed: the rule's needle is found case-sensitively; write "
                                       "the words as vLLM prints them (or a class such as [Dd]epth)")
    if "needle" in r:
        needles = _strings(r["needle"], f"{where}.needle")
        short = [n for n in needles if len(n) < regex_check.MIN_NEEDLE]
        if short:
            raise _err(f"{where}.needle", f"{short[0]!r}: at least {regex_check.MIN_NEEDLE} characters")
        if not regex_check.needles_cover(pattern, needles):
            derived = regex_check.derive_needles(pattern)
            hint = f" (e.g. {derived[0]!r})" if derived else ""
            raise _err(f"{where}.needle", f"{' or '.join(repr(n) for n in needles)} is not a literal part that every "
                                          f"match of the pattern holds{hint}: a line without it would never be tried")
    else:
        needles = regex_check.derive_needles(pattern)
        if not needles:
            raise _err(f"{where}.needle", f"the pattern holds no literal of {regex_check.MIN_NEEDLE}+ characters that "
                                          "every match holds: add one to the pattern (the rule is tried only on lines "
                                          "holding it)")
    fields = _fields(r.get("fields"), set(regex.groupindex), where)
    loggers = _strings(r["logger"], f"{where}.logger") if "logger" in r else ()
    for lg in loggers:
        if not _LOGGER.fullmatch(lg):
            raise _err(f"{where}.logger", f"{lg!r} is not a logger file (file.py or file.py:LINE)")
    levels: tuple[str, ...] = ()
    if "level" in r:
        levels = tuple(v.upper() for v in _strings(r["level"], f"{where}.level"))
        bad = [v for v in levels if v not in LEVELS]
        if bad:
            raise _err(f"{where}.level", f"{bad[0]!r} is not one of {', '.join(LEVELS)}")
    processes = _strings(r["process"], f"{where}.process") if "process" in r else ()
    if any(len(p) > 64 for p in processes):
        raise _err(f"{where}.process", "a process tag (glob) of up to 64 characters")
    client_text = r.get("client_text", False)
    if not isinstance(client_text, bool):
        raise _err(f"{where}.client_text", f"expected true or false, got {client_text!r}")
    max_chars = r.get("max_chars", DEFAULT_MAX_CHARS)
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or not 64 <= max_chars <= 16384:
        raise _err(f"{where}.max_chars", "expected a whole number in [64, 16384]")
    raw_metrics = r.get("metrics")
    if not isinstance(raw_metrics, list) or not 1 <= len(raw_metrics) <= MAX_METRICS:
        raise _err(f"{where}.metrics", f"expected a list of 1-{MAX_METRICS} metrics (what the rule's lines feed)")
    metrics = []
    for j, m in enumerate(raw_metrics):
        spec = _metric(m, name, fields, doc, f"{where}.metrics[{j}]")
        if any(o.name == spec.name for o in metrics):
            raise _err(f"{where}.metrics[{j}].name", f"{spec.name!r} is fed twice by this rule")
        clash = next((o for o in metrics if o.family == spec.family), None)
        if clash is not None:
            raise _err(f"{where}.metrics[{j}].name", _family_clash(spec, clash, "this rule"))
        metrics.append(spec)
    matcher, engine = rule_regex.compile_rule(pattern, regex)
    return RuleSpec(name, pattern, matcher, needles, tuple(fields.values()), tuple(metrics), doc, loggers, levels,
                    processes, client_text, max_chars, where, engine)


def load_rules(raw: Any, where: str, known: list[RuleSpec] | None = None) -> list[RuleSpec]:
    """A ``rules:`` list, checked against the rules already loaded (``known``, e.g. from other files): names
    are unique, and a metric fed by two rules is declared alike by both."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _err(where, "expected a list of rules")
    out = list(known or [])
    start = len(out)
    for i, item in enumerate(raw):
        spec = load_rule(item, f"{where}[{i}]")
        same = next((o for o in out if o.name == spec.name), None)
        if same is not None:
            raise _err(f"{where}[{i}].name", f"{spec.name!r} is already the name of {same.where}")
        for j, m in enumerate(spec.metrics):
            for o in out:
                theirs = next((x for x in o.metrics if x.name == m.name), None)
                if theirs is not None and theirs.shape() != m.shape():
                    raise _err(f"{spec.where}.metrics[{j}].name",
                               f"{m.name!r} is declared by rule {o.name} with another type, labels or buckets")
                clash = next((x for x in o.metrics if x.family == m.family and x.name != m.name), None)
                if clash is not None:
                    raise _err(f"{spec.where}.metrics[{j}].name", _family_clash(m, clash, f"rule {o.name}"))
        out.append(spec)
        if len(out) > MAX_RULES:
            raise _err(where, f"more than {MAX_RULES} rules")
    return out[start:]


def _family_clash(m: MetricSpec, other: MetricSpec, whose: str) -> str:
    """Two metrics one family: a counter X_total is the family X, as a gauge or histogram X is; the
    exposition would hold the family twice (OpenMetrics parsers, Prometheus' among them, refuse it)."""
    return (f"{m.name!r} ({m.type}) and {other.name!r} ({other.type}, fed by {whose}) are one metric family "
            f"({m.family!r}) in /metrics: name one of them otherwise")


def load_rule_file(path: str, known: list[RuleSpec] | None = None) -> list[RuleSpec]:
    """The rules of a YAML file holding ``rules:`` and/or ``rule_files:`` (a rules file, or a whole config
    file: its other keys are the config's business and not read here)."""
    data = load_yaml(path)
    if data is None:
        return []
    if not isinstance(data, dict):
        raise _err(path, "expected a mapping with rules: [...]")
    files = file_list(data.get("rule_files"), f"{path}: rule_files")
    return load_all(data.get("rules"), files, path, os.path.dirname(os.path.abspath(path)), known)


def file_list(raw: Any, where: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
        raise _err(where, "expected a list of file paths")
    return list(raw)


def load_all(inline: Any, files: list[str], where: str, base: str | None = None,
             known: list[RuleSpec] | None = None) -> list[RuleSpec]:
    """A config's rules: its ``rules:`` list, then each of ``files`` (relative to ``base``); checked against
    ``known`` (rules loaded before) too."""
    known = list(known or [])
    rules = load_rules(inline, f"{where}: rules", known)
    for path in files:
        full = os.path.join(base, path) if base and not os.path.isabs(path) else path
        rules += _load_included(full, known + rules)
    return rules


def _load_included(path: str, known: list[RuleSpec]) -> list[RuleSpec]:
    data = load_yaml(path)
    if data is None:
        return []
    if not isinstance(data, dict):
        raise _err(path, "expected a mapping with rules: [...]")
    extra = set(data) - {"rules"}
    if extra:
        raise _err(f"{path}: {sorted(extra)[0]}", "unknown key in a rules file (expected: rules)")
    return load_rules(data.get("rules"), f"{path}: rules", known)
