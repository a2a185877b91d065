#!/usr/bin/env python3
"""Write docs/metric-reference.md: every family the exporter serves, with its type, labels and HELP as
the code declares them, and the lines it is read from.

Which lines feed a family is not written down by hand: the real-line fixtures (the captures of real vLLM
servers, lines copied from public threads) and the packaged samples are fed through the real pipeline
into the real metrics, and every series an event sets (a new series, or a new non-zero value) is put
down to that event's kind; a family's example line is the first line that gave such an event, in the
order of SOURCES (real vLLM output first). A family set by no line is the exporter's own.

    .venv/bin/python tools/metric_reference.py           # rewrites docs/metric-reference.md
    .venv/bin/python tools/metric_reference.py --check   # exit 1 when it is stale (tests/test_metric_reference.py)
"""

from __future__ import annotations

import ast
import contextlib
import gzip
import sys
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from exporter.config.rules import load_rule_file  # noqa: E402
from exporter.framing.clock import Clock  # noqa: E402
from exporter.metrics import Metrics  # noqa: E402
from exporter.metrics.tables import HistogramFamily, _ValueFamily  # noqa: E402
from exporter.parsers.events import DERIVED_KINDS  # noqa: E402
from exporter.parsers.rules import families as rule_families  # noqa: E402
from exporter.stream.pipeline import Pipeline  # noqa: E402

OUT = ROOT / "docs" / "metric-reference.md"
FIXTURES = ROOT / "tests" / "fixtures"
RULES = ROOT / "examples" / "custom-build.rules.yaml"  # only to make the rule families; its own series are the example's
MAX_LINE_CHARS = 220
# Families every event moves, which say nothing of where a line came from.
EVERY_EVENT = {"vllm_log_exporter_events"}


def sources() -> list[tuple[str, list[str] | list[list[str]], str]]:
    """(label, lines, how) in the order an example line is preferred: real vLLM output first (captures
    of real servers, a real server's journal, lines from public threads), then the packaged samples.
    ``how`` is "stream" (one pipeline for the file) or "each" (a fresh pipeline per entry)."""
    out: list = []
    for d in sorted(FIXTURES.glob("vllm-*-cpu"), reverse=True):  # the newest release first
        for log in sorted(d.glob("*.log.gz")):
            out.append((str(log.relative_to(ROOT)), gzip.decompress(log.read_bytes()).decode().splitlines(), "stream"))
    for name in ("seed_article.log", "warning_signs.log"):
        out.append((f"tests/fixtures/{name}", (FIXTURES / name).read_text(encoding="utf-8").splitlines(), "stream"))
    for f in sorted((FIXTURES / "real_lines").glob("*.yaml")):
        entries = [e for e in yaml.safe_load(f.read_text(encoding="utf-8")) or [] if isinstance(e, dict) and e.get("line")]
        out.append((str(f.relative_to(ROOT)), [[e["line"], e.get("source", "")] for e in entries], "each"))
    for name in ("sample.log", "sample-lmcache.log", "sample-v0.log"):
        out.append((f"exporter/data/{name}", (ROOT / "exporter" / "data" / name).read_text(encoding="utf-8").splitlines(),
                    "stream"))
    out.append(("examples/custom-build.log", (ROOT / "examples" / "custom-build.log").read_text(encoding="utf-8").splitlines(), "stream"))
    return out


class _Watched(dict):
    """A family's ``values`` that notes its family when an event sets a series: a new one, or a new
    non-zero value (a series set back to 0 by a death or a stop was not read from that line)."""

    __slots__ = ("family", "moved")

    def __init__(self, data, family: str, moved: set):
        super().__init__(data)
        self.family, self.moved = family, moved

    def __setitem__(self, key, value):
        old = self.get(key, _MISSING)
        if old is _MISSING or (value != old and value != 0):
            self.moved.add(self.family)
        super().__setitem__(key, value)


_MISSING = object()


@contextlib.contextmanager
def _watching(moved: set):
    """Every family made meanwhile keeps its series in a _Watched dict from the start (the metrics keep
    references to those dicts), and a histogram notes each observation."""
    inits = {cls: cls.__init__ for cls in (_ValueFamily, HistogramFamily)}
    observe = HistogramFamily.observe

    def init(cls):
        def watched_init(self, name, *args, **kwargs):
            inits[cls](self, name, *args, **kwargs)
            self.values = _Watched(self.values, name, moved)
        return watched_init

    def watched_observe(self, labels, value):
        moved.add(self.name)
        return observe(self, labels, value)

    for cls in inits:
        cls.__init__ = init(cls)
    HistogramFamily.observe = watched_observe
    try:
        yield
    finally:
        for cls, original in inits.items():
            cls.__init__ = original
        HistogramFamily.observe = observe


@dataclass
class Family:
    name: str  # as exposed (a counter with _total)
    kind: str
    labels: list[str]
    help: str
    module: str
    fed_by: dict[str, tuple[str, str]] = field(default_factory=dict)  # event kind -> (line, where from)


def _modules() -> dict[str, str]:
    """Each metrics module's source, to find which declares a family (its name as a string literal)."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted((ROOT / "exporter" / "metrics").glob("*.py"))}


def _section(module: str) -> str:
    if module == "__init__":
        return "The exporter itself"
    doc = ast.get_docstring(ast.parse((ROOT / "exporter" / "metrics" / f"{module}.py").read_text(encoding="utf-8"))) or module
    return doc.split("\n\n")[0].replace("\n", " ").rstrip(".")


def collect() -> list[Family]:
    specs = load_rule_file(str(RULES))
    own = {m.name for s in specs for m in s.metrics}
    moved: set[str] = set()
    with _watching(moved):
        metrics = Metrics(process_metrics=False)
        metrics.set_rules(specs)
    metrics.tls_certificate(0.0)  # made only with TLS on
    modules = _modules()
    families: dict[str, Family] = {}
    for fam in metrics._table.families:
        base = fam.name
        if base.removesuffix("_total") in own or base in own:
            continue
        exposed = base + "_total" if fam.__class__.__name__ == "CounterFamily" else base
        kind = {"CounterFamily": "counter", "HistogramFamily": "histogram"}.get(fam.__class__.__name__, "gauge")
        module = next((m for m, src in modules.items() if f'"{base}"' in src), "__init__")
        families[base] = Family(exposed, kind, list(fam.labelnames), fam.doc, module)
    for m in metrics._native.collect():  # the exporter's own (HTTP side, state file, build)
        if m.name.startswith(("process_", "python_")):
            continue
        labels = sorted({k for s in m.samples for k in s.labels})
        exposed = m.name + "_total" if m.type == "counter" else m.name
        families[m.name] = Family(exposed, m.type, labels, m.documentation, "__init__")

    with _watching(moved):
        for label, lines, how in sources():
            groups = [[(ln, "") for ln in lines]] if how == "stream" else [[(ln, src)] for ln, src in lines]
            for group in groups:
                server = "ref"
                pipe = Pipeline(Clock(year=2026, tz=timezone.utc), families=rule_families(specs))
                metrics.add_server(server)
                fed = [(ln, src, pipe.feed(ln)[1]) for ln, src in group]
                fed.append(("", "", pipe.flush()))
                last_line, last_src = "", ""
                for line, src, events in fed:
                    if line:
                        last_line, last_src = line, src
                    for ev in events:
                        moved.clear()
                        metrics.observe(server, ev)
                        for name in moved - EVERY_EVENT:
                            f = families.get(name)
                            if f is not None and ev.kind not in f.fed_by:
                                f.fed_by[ev.kind] = (last_line, last_src or label)
                metrics.forget_server(server)
    return sorted(families.values(), key=lambda f: (list(_modules()).index(f.module) if f.module != "__init__" else 99,
                                                    f.name))


def _short(line: str) -> str:
    line = line.replace("`", "'")
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS - 1] + "…"


def render(families: list[Family]) -> str:
    out = ["# Metric reference", "",
           "<!-- Generated by tools/metric_reference.py from the code and this project's real-line fixtures: do not",
           "edit; run `.venv/bin/python tools/metric_reference.py` (tests/test_metric_reference.py fails while it is",
           "stale). -->", "",
           "Every family the exporter serves, as `/metrics` names it, with its type, labels and HELP. Every series",
           "also has the `server` label (the source's name). \"Read from\" gives, for each kind of line that sets",
           "the family, the first such line in this project's fixtures, real vLLM output first: captures of real",
           "vLLM servers (`tests/fixtures/vllm-*-cpu/`), lines copied from public threads (their address given),",
           "then the demo's samples. Kinds the exporter decides from the lines around them (a death, a stop, a",
           "failed start, the server's state) show the line at which it decided. The families by topic, with",
           "what the numbers mean: [metrics](metrics.md). Not listed: `process_*` and `python_*`, the process's",
           "own, from prometheus-client.", ""]
    section = None
    for f in families:
        title = _section(f.module)
        if title != section:
            out += [f"## {title}", ""]
            section = title
        labels = ", ".join(f"`{lb}`" for lb in f.labels if lb != "server") or "none but `server`"
        if f.module == "__init__" and "server" not in f.labels:
            labels = ", ".join(f"`{lb}`" for lb in f.labels) or "none"
        out += [f"### `{f.name}`", "", f"{f.kind}; labels: {labels}. {f.help}", ""]
        if not f.fed_by:
            out += ["Set by the exporter itself, from no line of the log." if f.module == "__init__" else
                    "No line in this project's fixtures sets it; its HELP says what does.", ""]
            continue
        for kind, (line, where) in f.fed_by.items():
            said = (f"- `{kind}`, which the exporter decides from the lines around it, here at this line of {where}:"
                    if kind in DERIVED_KINDS else f"- `{kind}` lines, as in {where}:")
            out += [said, "", "  ```", f"  {_short(line)}", "  ```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = render(collect())
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run .venv/bin/python tools/metric_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {text.count(chr(10) + '### ')} families")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
