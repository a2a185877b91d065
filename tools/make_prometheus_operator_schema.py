#!/usr/bin/env python3
"""Regenerate tests/schemas/prometheus-operator.schema.json from prometheus-operator's CRDs.

    python tools/make_prometheus_operator_schema.py DIR VERSION

DIR holds prometheus-operator's example/prometheus-operator-crd/ files (a checkout of the tag
VERSION). kubernetes-validate has schemas for Kubernetes' own kinds only; tests/test_helm.py checks
the chart's ServiceMonitor, PodMonitor and PrometheusRule against each CRD's openAPIV3Schema
instead. Descriptions are dropped (the file stays small), and every object schema that lists its
properties gets `additionalProperties: false` unless it says otherwise: the API server prunes or, with
`kubectl apply --validate=strict` (the default since 1.27 warns), refuses unknown fields, and a
misspelt field must fail the test rather than vanish in the cluster.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

KINDS = {"ServiceMonitor": "servicemonitors", "PodMonitor": "podmonitors", "PrometheusRule": "prometheusrules"}
OUT = Path(__file__).resolve().parent.parent / "tests" / "schemas" / "prometheus-operator.schema.json"


def strict(node):
    if isinstance(node, dict):
        node = {k: strict(v) for k, v in node.items() if k != "description"}
        if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node \
                and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [strict(v) for v in node]
    return node


def main(directory: str, version: str) -> None:
    out = {"$comment": f"openAPIV3Schema of prometheus-operator {version}'s CRDs (example/prometheus-operator-crd/), "
                       "descriptions dropped, unknown fields refused; regenerate with tools/make_prometheus_operator_schema.py",
           "kinds": {}}
    for kind, plural in KINDS.items():
        crd = yaml.safe_load((Path(directory) / f"monitoring.coreos.com_{plural}.yaml").read_text())
        version_entry = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
        schema = strict(version_entry["schema"]["openAPIV3Schema"])
        schema["properties"]["metadata"] = {"type": "object"}
        out["kinds"][kind] = schema
    OUT.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
