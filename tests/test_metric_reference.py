"""docs/metric-reference.md is what tools/metric_reference.py makes of today's code and fixtures, and it
names every family the exporter serves."""

import re

import pytest

from tests.golden_metrics import GOLDEN
from tools import metric_reference


@pytest.fixture(scope="module")
def families():
    return metric_reference.collect()  # (a few seconds: every real-line fixture through the pipeline)


def test_the_reference_is_not_stale(families):
    text = metric_reference.render(families)
    assert metric_reference.OUT.read_text(encoding="utf-8") == text, \
        "docs/metric-reference.md is stale: run .venv/bin/python tools/metric_reference.py and commit it"


def test_every_family_of_every_golden_metrics_is_in_the_reference_with_its_type():
    listed = dict(re.findall(r"^### `(\w+)`\n\n(\w+);", metric_reference.OUT.read_text(encoding="utf-8"), re.M))
    served = {}
    for f in GOLDEN.rglob("*.prom"):
        for line in f.read_text().splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split()
                served[name + "_total" if kind == "counter" and not name.endswith("_total") else name] = kind
    assert len(served) > 90
    missing = {n for n in served if n not in listed and not n.startswith(("process_", "python_"))}
    assert not missing, f"not in docs/metric-reference.md: {sorted(missing)}"
    wrong = {n: (listed[n], k) for n, k in served.items() if n in listed and listed[n] != k}
    assert not wrong, wrong


def test_every_family_read_from_a_line_shows_one(families):
    """A family that lines set says which: the first real line of each kind, or the exporter's own."""
    own = {f.name for f in families if not f.fed_by}
    # (the exporter's own, and the prices its config gives: exporter.metrics.cost)
    assert own <= {f.name for f in families if f.module in ("__init__", "cost")} | {
        "vllm_log_rule_invalid_values_total", "vllm_log_rule_label_overflow_total"}, own
    assert all(line for f in families for line, _ in f.fed_by.values())
