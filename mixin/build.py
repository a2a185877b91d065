"""Render the mixin into the repo, or check that what is committed is current and sound.

    python -m mixin.build            # writes dashboards/*.json and deploy/prometheus/rules/vllm-log-exporter.rules.yml
    python -m mixin.build --check    # fails when those files are stale, or when a panel or rule names a
                                     # metric the exporter does not export (found in the sample logs, or
                                     # declared by exporter.metrics)

The metric check is what keeps us from shipping a rule like ``rate(vllm:num_preemptions[5m])``
that can never fire because the series is really ``..._total``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

from mixin import alerts, cost, dashboards, slo_board, status_board
from mixin import config as C
from mixin.slo_buckets import threshold_problems

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD_DIR = ROOT / "dashboards"
RULES_FILE = ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules.yml"
HEADER = "# Rendered by `python -m mixin.build` from mixin/alerts.py; edit that, not this.\n"

_METRIC = re.compile(r"\b(vllm_log_[a-zA-Z0-9_]+)")
_OTHER_METRICS = {"up"}  # Prometheus' own


class _Literal(str):
    pass


def _literal(dumper, data):
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


yaml.SafeDumper.add_representer(_Literal, _literal)


def render_rules() -> str:
    groups = alerts.groups()
    for g in groups:
        for r in g["rules"]:
            r["expr"] = _Literal(r["expr"])
    text = yaml.safe_dump({"groups": groups}, sort_keys=False, width=200, allow_unicode=True)
    # what a recorded series counts, said above its rule (a rule has no HELP)
    for record, comment in cost.COMMENTS.items():
        text = text.replace(f"  - record: {record}\n", "".join(f"  # {line}\n" for line in _wrap(comment))
                            + f"  - record: {record}\n", 1)
    return HEADER + text


def _wrap(text: str) -> list[str]:
    import textwrap

    return textwrap.wrap(text, 110)


def boards() -> dict:
    """Every board: name -> the function that builds it."""
    return {**dashboards.DASHBOARDS, **slo_board.DASHBOARDS, **status_board.DASHBOARDS}


def render_dashboards() -> dict[str, str]:
    return {name: json.dumps(build(), indent=2, ensure_ascii=False) + "\n" for name, build in boards().items()}


def exported_metric_names() -> set[str]:
    """Every sample name the exporter produces, found by feeding it every sample log."""
    from exporter.framing.clock import Clock
    from exporter.metrics import Metrics
    from exporter.stream.pipeline import Pipeline

    m = Metrics(process_metrics=False)
    for i, name in enumerate(("sample.log", "sample-v0.log", "sample-lmcache.log")):
        server = f"s{i}"
        m.add_server(server)
        pipe = Pipeline(Clock(year=2026))
        text = (ROOT / "exporter" / "data" / name).read_text(encoding="utf-8")
        for line in text.splitlines():
            result, events = pipe.feed(line)
            m.count_line(server, result)
            for ev in events:
                m.observe(server, ev)
        for ev in pipe.flush():
            m.observe(server, ev)
    # a series absent until a line carries its field: 'Preemptions: N' in a V1 stats line (the parser's
    # format; vLLM 0.11-0.32's logger never prints it, exporter.metrics.engine), in no sample
    m.add_server("s3")
    pipe = Pipeline(Clock(year=2026))
    for ev in pipe.feed("(APIServer pid=1) INFO 12-04 10:00:00 [loggers.py:335] Engine 000: Avg prompt throughput: "
                        "1.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
                        "Preemptions: 2, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")[1] + pipe.flush():
        m.observe("s3", ev)
    # a server read from kubelet's pod log layout: its pod info comes from the path, not from a line
    m.set_pod("s0", "llm", "vllm-0", "vllm")
    names = set()
    for fam in m.registry.collect():
        for s in fam.samples:
            names.add(s.name)
    # and every family the exporter declares, as it writes it: a failure family (KV that did not arrive, a
    # data-parallel rank lost) has no line in the healthy samples, yet its panel and rule name a metric the
    # exporter exports the moment the log says it
    from exporter.metrics.tables import CounterFamily, HistogramFamily

    for fam in m._table.families:
        if isinstance(fam, CounterFamily):
            names.add(fam.name + "_total")
        elif isinstance(fam, HistogramFamily):
            names.update(fam.name + suffix for suffix in ("_bucket", "_sum", "_count"))
        else:
            names.add(fam.name)
    return names


def expressions() -> list[tuple[str, str]]:
    """(where, PromQL) of every dashboard target and variable query, and every rule."""
    out = []
    for name, build in boards().items():
        d = build()
        for p in d["panels"]:
            for t in p.get("targets", []):
                out.append((f"dashboards/{name}: panel {p['title']!r}", t["expr"]))
        for v in d["templating"]["list"]:
            if v["type"] == "query":
                out.append((f"dashboards/{name}: variable {v['name']}", v["query"]["query"]))
        for a in d["annotations"]["list"]:
            if "expr" in a:
                out.append((f"dashboards/{name}: annotation {a['name']!r}", a["expr"]))
    for g in alerts.groups():
        for r in g["rules"]:
            out.append((f"rules: {r.get('alert') or r['record']}", r["expr"]))
    return out


def unknown_metrics() -> list[str]:
    known = exported_metric_names() | _OTHER_METRICS
    problems = []
    for where, expr in expressions():
        for name in _METRIC.findall(expr):
            if name not in known:
                problems.append(f"{where}: metric {name} is not exported by vllm-log-exporter")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mixin.build")
    ap.add_argument("--check", action="store_true", help="fail if the committed files are stale or unsound")
    args = ap.parse_args(argv)
    # an SLO threshold off vLLM's bucket bounds would render an SLI that never has data
    if problems := threshold_problems(C.SLOS):
        for p in problems:
            print(p, file=sys.stderr)
        return 1
    wanted = {DASHBOARD_DIR / n: text for n, text in render_dashboards().items()}
    wanted[RULES_FILE] = render_rules()
    if args.check:
        problems = unknown_metrics()
        sys.path.insert(0, str(ROOT / "tools"))
        import helm_chart_files

        problems += [f"{name}: stale; run python -m mixin.build" for name in helm_chart_files.stale()]
        for path, text in wanted.items():
            rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            if not path.exists():
                problems.append(f"{rel}: missing; run python -m mixin.build")
            elif path.read_text(encoding="utf-8") != text:
                problems.append(f"{rel}: stale; run python -m mixin.build")
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    # the Helm chart's copies of the rules and boards (it can read only its own files)
    sys.path.insert(0, str(ROOT / "tools"))
    import helm_chart_files

    for name in helm_chart_files.write():
        print(f"wrote {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
