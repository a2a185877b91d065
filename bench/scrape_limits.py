"""What one scrape of the exporter holds at the Helm chart's defaults, for its ServiceMonitor/PodMonitor
limits (sampleLimit, labelLimit, labelValueLengthLimit): samples per server on the busiest packaged sample
and on a log crafted to make new label values (tests/test_cardinality.py's flood, the per-server ceiling),
the exporter's own series, the most labels on one sample and the longest label value.

    .venv/bin/python bench/scrape_limits.py

The chart reads every vLLM pod of its node (pods: a glob) and keeps a gone pod's series for
pods.forgetGoneAfterSeconds (900): a rollout of a node's pods holds the old and the new ones at once.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exporter.framing.clock import Clock  # noqa: E402
from exporter.metrics import Metrics  # noqa: E402
from exporter.stream.pipeline import Pipeline  # noqa: E402
from tests.helpers import samples  # noqa: E402
from tests.test_cardinality import flood  # noqa: E402

# what the chart's endpoint adds to every sample (prometheus-operator's target labels: job, instance,
# namespace, pod, container, service, endpoint; the chart's relabelings: host)
TARGET_LABELS = 8


def _feed(m: Metrics, server: str, lines: list[str]) -> None:
    p = Pipeline(Clock(year=2026))
    m.add_server(server)
    for i in range(0, len(lines), 500):
        _, events, access, _ = p.feed_batch(lines[i:i + 500])
        m.observe_many(server, events)
        m.observe_access(server, access)
    m.observe_many(server, p.flush())


def main() -> int:
    sample = (ROOT / "exporter" / "data" / "sample.log").read_text(encoding="utf-8").splitlines()
    m = Metrics()  # with the process' own series, as the daemon serves them
    own = len(samples(m.render().decode()))
    _feed(m, "sample", sample)
    busy = len(samples(m.render().decode())) - own
    _feed(m, "flooded", sample + flood(5000, 1))
    s = samples(m.render().decode())
    ceiling = sum(1 for (_, labels) in s if ("server", "flooded") in labels)
    most = max(len(labels) for (_, labels) in s)
    longest = max((len(v) for (_, labels) in s for _, v in labels), default=0)
    print(f"exporter's own samples (no server): {own}")
    print(f"samples of a server replaying exporter/data/sample.log: {busy}")
    print(f"samples of a server whose log floods new label values (the per-server ceiling): {ceiling}")
    print(f"most labels on one sample: {most} (+{TARGET_LABELS} the target adds)")
    print(f"longest label value: {longest} characters")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
