"""CHANGELOG.md and the version move together: the newest release in the changelog is the version
pyproject.toml, exporter/__init__.py and the Helm chart's appVersion say, an Unreleased section stays
on top for the next one, and what it says of renamed series and alerts is true of the code."""

from __future__ import annotations

import re
import tomllib

import yaml

from exporter import __version__
from tests.golden_metrics import GOLDEN
from tests.helpers import ROOT

CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
SECTIONS = re.findall(r"^## \[([^\]]+)\](?: - (\S+))?", CHANGELOG, re.M)


def test_unreleased_stays_on_top_then_releases_newest_first_each_with_its_date():
    assert SECTIONS[0] == ("Unreleased", "")
    releases = SECTIONS[1:]
    assert releases and all(re.fullmatch(r"\d+\.\d+\.\d+", v) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", d)
                            for v, d in releases), releases
    versions = [tuple(map(int, v.split("."))) for v, _ in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert [d for _, d in releases] == sorted((d for _, d in releases), reverse=True)


def test_the_newest_release_is_the_version_everywhere():
    newest = SECTIONS[1][0]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "vllm-log-exporter" / "Chart.yaml").read_text())
    assert newest == __version__ == pyproject == chart["appVersion"]
    # and the Helm chart's install example builds that version
    assert f"registry.example/vllm-log-exporter:{__version__} " in (ROOT / "docs" / "kubernetes.md").read_text()


def _exported() -> set[str]:
    return {line.split()[2] for f in GOLDEN.rglob("*.prom") for line in f.read_text().splitlines()
            if line.startswith("# TYPE ")}


def test_renamed_series_are_gone_and_their_new_names_exported():
    table = re.findall(r"^\| `(vllm_log_\w+)` \| `(vllm_log_\w+)", CHANGELOG, re.M)
    assert len(table) >= 6
    exported = _exported()
    for old, new in table:
        assert old not in exported and new in exported, (old, new)
    # docs/metrics.md's list of renamed series says no more than the changelog does
    readme = (ROOT / "docs" / "metrics.md").read_text()
    para = readme[readme.index("Renamed, for what they count"):]
    para = para[:para.index("\n\n")]
    said = set(re.findall(r"`(vllm_log_\w+)`\s+is\s+(?:now\s+)?`(vllm_log_\w+)", para))
    assert said <= set(table)


def test_every_alert_the_changelog_names_is_a_rule():
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    named = set(re.findall(r"`(Vllm[A-Z]\w+)`", CHANGELOG))
    assert named and named <= alerts, named - alerts
