#!/usr/bin/env python3
"""Copy the alert rules and the dashboards into the Helm chart, which can read only its own files.

    python tools/helm_chart_files.py          # write deploy/helm/vllm-log-exporter/files/
    python tools/helm_chart_files.py --check  # exit 1, naming each stale copy, when they differ

The sources of truth stay where `python -m mixin.build` writes them
(deploy/prometheus/rules/vllm-log-exporter.rules.yml, dashboards/*.json); the chart's copies are
byte for byte the same, which tests/test_helm.py checks. Run it after `python -m mixin.build`.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "vllm-log-exporter"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules.yml"


def wanted() -> dict[Path, bytes]:
    """Each chart copy and the bytes it must hold."""
    out = {CHART / "files" / RULES.name: RULES.read_bytes()}
    for board in sorted((ROOT / "dashboards").glob("*.json")):
        out[CHART / "files" / "dashboards" / board.name] = board.read_bytes()
    return out


def stale() -> list[str]:
    """What differs: copies missing or different, and dashboards copied that no longer exist."""
    want = wanted()
    out = [str(p.relative_to(ROOT)) for p, data in want.items() if not p.is_file() or p.read_bytes() != data]
    out += [str(p.relative_to(ROOT)) + " (no longer in dashboards/)"
            for p in sorted((CHART / "files" / "dashboards").glob("*.json")) if p not in want]
    return out


def write() -> list[str]:
    changed = stale()
    want = wanted()
    for path, data in want.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
    for path in (CHART / "files" / "dashboards").glob("*.json"):
        if path not in want:
            path.unlink()
    return changed


def main(argv: list[str]) -> int:
    if "--check" in argv:
        bad = stale()
        for name in bad:
            print(f"stale: {name} (run: python tools/helm_chart_files.py)", file=sys.stderr)
        return 1 if bad else 0
    for name in write():
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
