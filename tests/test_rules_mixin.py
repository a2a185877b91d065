"""mixin/rules.py: a dashboard row per user rule, held to our boards' rules (Grafana's schema, the
dashboard-linter's rules, our layout), and every panel's query answered by a real Prometheus scraping the
real exporter that runs the rules."""

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from exporter.config.rules import load_rule_file
from mixin.rules import rule_row, rules_board
from mixin.dashboards import Board
from tests.helpers import Exporter, Prometheus, grafana_substitute, have, wait_until
from tests.test_mixin import SCHEMA, lint

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "examples" / "custom-build.rules.yaml"
SPECS = load_rule_file(str(RULES))
NAMES = {m.name for s in SPECS for m in s.metrics}


def board() -> dict:
    return rules_board(SPECS)


def test_the_board_is_one_grafana_accepts_and_our_linter_passes():
    d = board()
    assert [e.message for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(d)] == []
    assert lint(d) == []
    rows = [p["title"] for p in d["panels"] if p["type"] == "row"]
    assert rows == [f"Rule: {s.name}" for s in SPECS]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells
                cells.add((x, y))


def test_the_rules_counters_are_rated_and_selected_like_ours():
    # the linter's counter and selector rules cover vllm_log_* only: the same rules for the rules' own names
    for p in board()["panels"]:
        for t in p.get("targets", []):
            expr = t["expr"]
            for m in re.finditer(r"\b(\w+)\{([^}]*)\}", expr):
                name = m.group(1)
                base = re.sub(r"_(bucket|count|sum)$", "", name)
                if base not in NAMES and name not in NAMES:
                    continue
                for var in ("cluster", "job", "host", "instance", "server"):
                    assert f'{var}=~"${var}"' in m.group(2), (p["title"], expr)
                if name.endswith(("_total", "_bucket")):
                    assert re.search(rf"rate\({name}\{{[^}}]*\}}\[\$__rate_interval\]\)", expr), expr
            assert p["fieldConfig"]["defaults"]["unit"] and p["description"]


def test_a_row_goes_into_any_board_and_the_command_line_prints_both():
    b = Board("vllm-log-mine", "Mine", "my board", [])
    b.row("My own panels")
    rule_row(b, SPECS[0])
    assert [p["title"] for p in b.panels if p["type"] == "row"] == ["My own panels", "Rule: draft_depth"]
    r = subprocess.run([sys.executable, "-m", "mixin.rules", str(RULES)], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout) == board()
    r = subprocess.run([sys.executable, "-m", "mixin.rules", str(RULES), "--row", "moe_quant_mode"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    panels = json.loads(r.stdout)
    assert [p["title"] for p in panels] == ["Rule: moe_quant_mode", "Lines matched", "custom_moe_quant_mode_info"]
    r = subprocess.run([sys.executable, "-m", "mixin.rules", str(RULES), "--row", "nope"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no rule 'nope'" in r.stderr


@pytest.mark.skipif(not have("prometheus"), reason="prometheus (Debian package) not installed")
def test_every_panel_has_data_from_the_real_exporter(tmp_path):
    log = tmp_path / "grandpa.log"
    log.write_text((ROOT / "examples" / "sample.log").read_text(encoding="utf-8"))
    with Exporter("--source", str(log), "--from-start", "--rules", str(RULES)) as ex:
        config = {"global": {"scrape_interval": "1s"},
                  "scrape_configs": [{"job_name": "vllm-log-exporter",
                                      "static_configs": [{"targets": [f"127.0.0.1:{ex.port}"]}]}]}
        with Prometheus(tmp_path, config) as prom:
            wait_until(lambda: prom.query('vllm_log_rule_lines_total{rule="draft_depth"} > 60'), 30, 0.5,
                       what="the rules' lines in Prometheus")
            time.sleep(2.5)  # two scrapes more, then the lines again: the rates move
            with log.open("a", encoding="utf-8") as f:
                f.write((ROOT / "examples" / "custom-build.log").read_text(encoding="utf-8"))
            wait_until(lambda: prom.query('increase(vllm_log_rule_lines_total{rule="draft_depth"}[1m]) > 0'), 30, 0.5,
                       what="the appended lines scraped")
            time.sleep(1.5)
            for p in board()["panels"]:
                for t in p.get("targets", []):
                    expr = grafana_substitute(t["expr"])
                    res = prom.query(expr)
                    assert res, f"{p['title']}: no data for {expr}"
                    if "histogram_quantile" in expr:
                        assert all(math.isfinite(float(x["value"][1])) for x in res), (expr, res)
