"""`report --rules FILE`: a section per rule with the per-window figures the built-in families get (median,
Tukey's IQR, best), checked against the same figures computed here from the log's text."""

import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "sample.log"  # the seed's server, made by tools/make_sample_log.py

RULES = {"rules": [
    {"name": "draft_depth", "help": "DSpark's acceptance length at each depth",
     "pattern": r"Mean acceptance length: (?P<length>[\d.]+), Current speculative depth: (?P<depth>\d+)",
     "logger": "metrics.py", "fields": {"length": "float", "depth": "int"},
     "metrics": [{"name": "custom_draft_windows_total", "type": "counter", "labels": {"depth": {"max_values": 8}}},
                 {"name": "custom_draft_acceptance_length", "type": "histogram", "value": "length",
                  "buckets": [1, 2, 3, 4, 5, 6]}]},
    {"name": "region_workers", "pattern": r"Unlinked mmap file \S+ after (?P<workers>\d+) workers mapped it",
     "fields": {"workers": "int"},
     "metrics": [{"name": "custom_offload_region_workers", "type": "gauge", "value": "workers", "better": "lower"}]},
    {"name": "never", "pattern": r"No such line (?P<n>\d+)", "fields": {"n": "int"},
     "metrics": [{"name": "custom_never", "type": "gauge", "value": "n"}]},
]}


def report(tmp_path, *args):
    rules = tmp_path / "r.yaml"
    rules.write_text(yaml.safe_dump(RULES))
    r = subprocess.run([sys.executable, "-m", "exporter", "report", str(SAMPLE), "--year", "2026", "--timezone", "UTC",
                        "--rules", str(rules), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def hinges(values):
    s = sorted(values)
    half = (len(s) + 1) // 2
    return [statistics.median(s[:half]), statistics.median(s[len(s) - half:])]


def test_a_section_per_rule_with_the_figures_of_its_windows(tmp_path):
    out = json.loads(report(tmp_path, "--format", "json"))
    text = SAMPLE.read_text(encoding="utf-8")
    lengths = [float(x) for x in re.findall(r"Mean acceptance length: ([\d.]+), Current speculative depth: 5", text)]
    assert len(lengths) > 20
    depth, workers, never = out["rules"]
    assert (depth["rule"], depth["lines"]) == ("draft_depth", len(lengths))
    windows, hist = depth["metrics"]
    assert windows["total"] == len(lengths)
    assert windows["by_label"] == [{"labels": {"depth": "5"}, "updates": len(lengths), "total": len(lengths)}]
    assert hist["windows"] == len(lengths)
    assert hist["median"] == statistics.median(lengths)
    assert hist["iqr"] == hinges(lengths)
    assert (hist["best"], hist["worst"]) == (max(lengths), min(lengths))
    # better: lower
    n = [int(x) for x in re.findall(r"after (\d+) workers mapped it", text)]
    (g,) = workers["metrics"]
    assert n and (g["windows"], g["best"], g["worst"]) == (len(n), min(n), max(n))
    assert never["lines"] == 0 and never["metrics"][0]["windows"] == 0 and never["metrics"][0]["median"] is None


def test_the_markdown_sections_and_a_report_without_rules_unchanged(tmp_path):
    md = report(tmp_path)
    assert "## Rule: draft_depth\n\nDSpark's acceptance length at each depth. 65 lines matched, from 2026-08-04" in md
    assert "| custom_draft_windows_total{depth=\"5\"} | 65 | – | – | – | 65 |" in md
    assert re.search(r"\| custom_draft_acceptance_length \| 65 \| \d\.\d\d \| \d\.\d\d – \d\.\d\d \| \d\.\d\d \| – \|", md)
    assert "## Rule: never\n\nNo line matched in this range." in md
    plain = subprocess.run([sys.executable, "-m", "exporter", "report", str(SAMPLE), "--year", "2026", "--timezone",
                            "UTC", "--format", "json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "rules" not in json.loads(plain.stdout)
    assert md.startswith(subprocess.run([sys.executable, "-m", "exporter", "report", str(SAMPLE), "--year", "2026",
                                         "--timezone", "UTC"], cwd=ROOT, capture_output=True, text=True,
                                        timeout=120).stdout.rstrip("\n"))


def test_a_time_range_holds_the_rules_too(tmp_path):
    out = json.loads(report(tmp_path, "--format", "json", "--since", "2026-08-04T02:50:00+00:00"))
    text = SAMPLE.read_text(encoding="utf-8")
    later = [line for line in text.splitlines() if "Current speculative depth" in line and line[7:15] >= "02:50:00"]
    assert 0 < out["rules"][0]["lines"] == len(later) < 65


def test_a_broken_rules_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"rules": [dict(RULES["rules"][1], name="Bad")]}))
    r = subprocess.run([sys.executable, "-m", "exporter", "report", str(SAMPLE), "--rules", str(bad)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        f"vllm-log-exporter: {bad}: rules[0].name: 'Bad' must be 1-63 of a-z, 0-9, _ starting with a letter"]


def test_backfill_writes_the_rules_series_and_promtool_takes_them(tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text(yaml.safe_dump(RULES))
    om = tmp_path / "run.om"
    r = subprocess.run([sys.executable, "-m", "exporter", "backfill", str(SAMPLE), "-o", str(om), "--server", "grandpa",
                        "--year", "2026", "--timezone", "UTC", "--rules", str(rules)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = om.read_text()
    windows = [float(line.split()[1]) for line in text.splitlines()
               if line.startswith('custom_draft_windows_total{depth="5",server="grandpa"}')]
    assert windows and windows[-1] == 65 and windows == sorted(windows)
    assert "# TYPE custom_draft_acceptance_length histogram" in text
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(tmp_path / "data")],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
