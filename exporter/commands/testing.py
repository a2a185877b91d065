"""``vllm-log-exporter test --rules FILE [LINES|-] [--expect EXPECT.yaml]``: check a user's rules before
they run in a daemon.

With LINES: every line with what it became, the built-in families' events and each rule's fields, and
the series the line moved (the rules' own and ours). A rule whose pattern matches a line it refused says
why (its logger, level, process, or client text).

With ``--expect``: a YAML file of lines and what they must give, exit status 1 when any does not (so the
checks can run in the user's CI)::

    server: test                       # the `server` label (default: test)
    tests:
      - name: the offload region       # optional
        line: '(Worker_TP0 pid=264) INFO 08-04 02:44:22 [shared_offload_region.py:85] Created ...'
        # or lines: [...], fed in order
        rules:                         # rule -> fields the line(s) gave it (these at least); null: no match
          offload_region: {size: 8590000000}
        series:                        # series after the line(s), labels without `server`; null: absent
          custom_offload_region_bytes: 8590000000
        builtin: [log]                 # optional: the built-in families' event kinds, exactly

Exit status: 0 all passed (or lines explained), 1 an expectation failed, 2 the rules or the file did not
load.
"""

from __future__ import annotations

import math
import sys
from typing import TextIO

from exporter.config.rules import load_rule_file
from exporter.config.yaml_file import load_yaml
from exporter.config.settings import ConfigError
from exporter.framing.clock import Clock
from exporter.framing.frame import frame_line
from exporter.metrics import Metrics
from exporter.metrics.tables import CounterFamily, HistogramFamily
from exporter.parsers.rules import families, refusal
from exporter.stream.pipeline import Pipeline

_TEST_KEYS = {"name", "line", "lines", "rules", "series", "builtin"}
# the exporter's bookkeeping, which every line moves: not what a rule test is about
_QUIET_FAMILIES = ("vllm_log_exporter_", "vllm_log_last_line_timestamp_seconds")
MAX_SHOWN = 12  # series listed per line (the rules' first)


class _Run:
    """A fresh stream and metrics with the rules loaded: what one test (or one LINES file) goes through."""

    def __init__(self, specs, clock: Clock, server: str):
        self.pipeline = Pipeline(clock, families=families(specs))
        self.metrics = Metrics(process_metrics=False)
        self.metrics.set_rules(specs)
        self.metrics.add_server(server)
        self.server = server

    def feed(self, line: str):
        """(result, events, series moved: key -> (before, after))."""
        before = samples(self.metrics, self.server)
        result, events = self.pipeline.feed(line)
        self.metrics.observe_many(self.server, events)
        return result, events, _moved(before, samples(self.metrics, self.server))

    def finish(self):
        before = samples(self.metrics, self.server)
        events = self.pipeline.flush()
        self.metrics.observe_many(self.server, events)
        self.metrics.settle_windows(self.server)  # (the lines ended: a first stats window counts now)
        return events, _moved(before, samples(self.metrics, self.server))


def _labels_text(names, values) -> str:
    pairs = [f'{n}="{v}"' for n, v in sorted(zip(names, values)) if n != "server"]
    return "{" + ",".join(pairs) + "}" if pairs else ""


def samples(metrics: Metrics, server: str) -> dict[str, float]:
    """Every sample of ``server`` as ``name{labels}`` (labels sorted, ``server`` left out) -> value; a
    histogram as its _count, _sum and _bucket samples."""
    out: dict[str, float] = {}
    for fam in metrics._table.families:
        if fam.name.startswith(_QUIET_FAMILIES):
            continue
        names = fam.labelnames
        for labels, value in fam.values.items():
            if labels[0] != server:
                continue
            if isinstance(fam, HistogramFamily):
                lt = _labels_text(names, labels)
                total = 0
                for le, n in zip(fam._le, value):
                    total += n
                    out[f"{fam.name}_bucket{_labels_text(names + ['le'], labels + (le,))}"] = total
                out[f"{fam.name}_count{lt}"] = total
                out[f"{fam.name}_sum{lt}"] = value[-1]
            else:
                suffix = "_total" if isinstance(fam, CounterFamily) else ""
                out[f"{fam.name}{suffix}{_labels_text(names, labels)}"] = value
    return out


def _moved(before: dict, after: dict) -> dict[str, tuple]:
    return {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v and not _same(before.get(k), v)} | \
        {k: (v, None) for k, v in before.items() if k not in after}


def _same(a, b) -> bool:
    return a is not None and b is not None and isinstance(a, float) and isinstance(b, float) and math.isnan(a) \
        and math.isnan(b)


def _num(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _fields(f: dict) -> str:
    shown = []
    for k, v in f.items():
        if k == "rule":
            continue
        if isinstance(v, (list, dict, str)):
            v = str(v)
            v = v if len(v) <= 60 else v[:57] + "..."
        shown.append(f"{k}={_num(v)}")
    return " ".join(shown) or "(no fields)"


# what a rule refused when the line itself does not say why: where it stands in the stream does
_NOT_OWN = ("it is not a line of its own here (a traceback's, a JSON record's later message line, or the continuation of "
            "a record that echoes a client's text; client_text: true lets the rule read the last two)")


def explain(specs, path: str, clock: Clock, server: str, out: TextIO) -> int:
    """Every line of ``path`` with what it became."""
    from exporter.offline.passes import Pass

    run = _Run(specs, clock, server)
    scan = Pass(path, clock)
    matched = {s.name: 0 for s in specs}
    n = 0
    for lines in scan.line_lists():
        for line in run.pipeline.join_parts(lines):
            n += 1
            result, events, moved = run.feed(line)
            out.write(f"line {n}: {line.rstrip()[:200]}\n")
            _describe(events, moved, out)
            for ev in events:
                if ev.kind == "rule":
                    matched[ev.fields["rule"]] += 1
            taken = {ev.fields["rule"] for ev in events if ev.kind == "rule"}
            for spec in specs:
                if spec.name not in taken and any(nd in line for nd in spec.needles):
                    f = frame_line(line, clock)
                    if spec.regex.search(f.message, 0, spec.max_chars):
                        out.write(f"  rule {spec.name}: its pattern matches, but {refusal(spec, f) or _NOT_OWN}\n")
            if not events and not moved:
                out.write(f"  {result}: nothing\n")
    events, moved = run.finish()
    if events or moved:
        out.write("at the end (tracebacks finished):\n")
        _describe(events, moved, out)
    out.write(f"lines read: {n}; rules matched: " + (", ".join(f"{k} {v}" for k, v in matched.items()) or "none") + "\n")
    return 0


def _describe(events, moved: dict, out: TextIO) -> None:
    for ev in events:
        if ev.kind == "rule":
            out.write(f"  rule {ev.fields['rule']}: {_fields(ev.fields)}\n")
        else:
            out.write(f"  built-in {ev.kind}: {_fields(ev.fields)}\n")
    # (a histogram shows as its _count and _sum; --expect can check its _bucket samples too)
    keys = sorted((k for k in moved if "_bucket{" not in k), key=lambda k: (k.startswith("vllm_log_"), k))
    for k in keys[:MAX_SHOWN]:
        was, now = moved[k]
        change = "(gone)" if now is None else _num(now) + ("" if was is None else f" (was {_num(was)})")
        out.write(f"    {k} {change}\n")
    if len(keys) > MAX_SHOWN:
        out.write(f"    ... and {len(keys) - MAX_SHOWN} more series\n")


# -- --expect --------------------------------------------------------------------------------------

def _close(want, got) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return want == got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(float(want), float(got), rel_tol=1e-9, abs_tol=1e-12)
    return str(want) == str(got)


def _series_key(key: str) -> str:
    """``name{b="2", a="1"}`` as samples() writes it: labels sorted, no spaces."""
    name, brace, rest = key.strip().partition("{")
    if not brace:
        return name
    pairs = []
    for part in _split_labels(rest.rstrip().removesuffix("}")):
        k, _, v = part.partition("=")
        pairs.append((k.strip(), v.strip().strip('"')))
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(pairs)) + "}"


def _split_labels(text: str) -> list[str]:
    parts, cur, quoted = [], [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def _check(specs, test: dict, clock: Clock, server: str) -> list[str]:
    """What the test's lines gave that it did not expect (empty: passed)."""
    lines = [test["line"]] if "line" in test else list(test["lines"])
    run = _Run(specs, clock, server)
    events = []
    for line in run.pipeline.join_parts([str(x) for x in lines]):
        events += run.feed(line)[1]
    events += run.finish()[0]
    problems = []
    ruled: dict[str, list[dict]] = {}
    for ev in events:
        if ev.kind == "rule":
            ruled.setdefault(ev.fields["rule"], []).append(ev.fields)
    for rule, want in (test.get("rules") or {}).items():
        got = ruled.get(rule)
        if want is None:
            if got:
                problems.append(f"rule {rule}: expected no match, got {_fields(got[0])}")
            continue
        if not got:
            problems.append(f"rule {rule}: expected a match, got none")
            continue
        if not any(all(k in g and _close(v, g[k]) for k, v in want.items()) for g in got):
            diff = [f"{k}: expected {_num(v)}, got {_num(got[-1][k]) if k in got[-1] else 'nothing'}"
                    for k, v in want.items() if not (k in got[-1] and _close(v, got[-1][k]))]
            problems.append(f"rule {rule}: " + "; ".join(diff))
    have = samples(run.metrics, server)
    for key, want in (test.get("series") or {}).items():
        k = _series_key(str(key))
        got = have.get(k)
        if want is None:
            if got is not None:
                problems.append(f"series {k}: expected absent, got {_num(got)}")
        elif got is None:
            problems.append(f"series {k}: expected {_num(want)}, got absent")
        elif not _close(want, got):
            problems.append(f"series {k}: expected {_num(want)}, got {_num(got)}")
    if "builtin" in test:
        want_kinds = sorted(set(test["builtin"] or []))
        got_kinds = sorted({ev.kind for ev in events if ev.kind != "rule"})
        if want_kinds != got_kinds:
            problems.append(f"builtin: expected {want_kinds}, got {got_kinds}")
    return problems


def _load_expect(path: str) -> tuple[str, list[dict]]:
    data = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("tests"), list):
        raise ConfigError(f"{path}: expected a mapping with tests: [...]")
    extra = set(data) - {"tests", "server"}
    if extra:
        raise ConfigError(f"{path}: {sorted(extra)[0]}: unknown key (expected one of: server, tests)")
    server = data.get("server", "test")
    if not isinstance(server, str) or not server:
        raise ConfigError(f"{path}: server: expected a name")
    for i, t in enumerate(data["tests"]):
        w = f"{path}: tests[{i}]"
        if not isinstance(t, dict):
            raise ConfigError(f"{w}: expected a mapping")
        bad = set(t) - _TEST_KEYS
        if bad:
            raise ConfigError(f"{w}.{sorted(bad)[0]}: unknown key (expected one of: {', '.join(sorted(_TEST_KEYS))})")
        if ("line" in t) == ("lines" in t):
            raise ConfigError(f"{w}: give line: or lines:")
        if "line" in t and not isinstance(t["line"], str):
            raise ConfigError(f"{w}.line: expected a string")
        if "lines" in t and (not isinstance(t["lines"], list) or not t["lines"]):
            raise ConfigError(f"{w}.lines: expected a list of lines")
        for key in ("rules", "series"):
            if t.get(key) is not None and not isinstance(t[key], dict):
                raise ConfigError(f"{w}.{key}: expected a mapping")
        for rule, want in (t.get("rules") or {}).items():
            if want is not None and not isinstance(want, dict):
                raise ConfigError(f"{w}.rules.{rule}: expected a mapping of field to value, or null")
        if "builtin" in t and not isinstance(t["builtin"], list):
            raise ConfigError(f"{w}.builtin: expected a list of event kinds")
    return server, data["tests"]


def check(specs, path: str, clock: Clock, out: TextIO) -> int:
    server, tests = _load_expect(path)
    names = {s.name for s in specs}
    for i, t in enumerate(tests):
        for rule in t.get("rules") or {}:
            if rule not in names:
                raise ConfigError(f"{path}: tests[{i}].rules.{rule}: no such rule (rules: {', '.join(sorted(names))})")
    failed = 0
    for i, t in enumerate(tests):
        label = f"{t['name']} (tests[{i}])" if t.get("name") else f"tests[{i}]"
        problems = _check(specs, t, clock, server)
        if problems:
            failed += 1
            out.write(f"FAIL  {label}\n")
            for p in problems:
                out.write(f"      {p}\n")
        else:
            out.write(f"ok    {label}\n")
    out.write(f"{len(tests)} tests, {failed} failed\n")
    return 1 if failed else 0


def run(args, clock: Clock, out: TextIO | None = None) -> int:
    from exporter.commands.common import Visible

    out = Visible(sys.stdout if out is None else out)  # the lines' text acts on no terminal (stdout as it is now)
    try:
        specs = []
        for path in args.rules:
            specs += load_rule_file(path, known=specs)
        names = [s.name for s in specs]
        status = 0
        if args.lines:
            status = explain(specs, args.lines, clock, args.server, out)
        if args.expect:
            status = max(status, check(specs, args.expect, clock, out))
        if not args.lines and not args.expect:
            out.write(f"{len(specs)} rules loaded: {', '.join(names) or 'none'}\n")
            for spec in specs:  # which engine matches each (exporter.config.rule_regex)
                out.write(f"  {spec.name}: matched by {spec.engine}\n")
        return status
    except ConfigError as e:
        print(f"vllm-log-exporter: {e}", file=sys.stderr)
        return 2
