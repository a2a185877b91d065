"""Dynamic draft lengths and DSpark's confidence calibration (issue 25 items 1-3).

Format source: no vLLM release logs these; the only copy is a fork's vllm/v1/spec_decode/metrics.py
(a DeepSeek-V4-Flash DSpark integration; stored-index file 67215301068, see
docs/research/issue25-post-0.32.md), whose SpecDecodingLogging.log adds "Draft length histogram: %s"
between the per-position rates and the average rate, and whose _log_dspark_sts_calibration logs
"DSpark STS calibration bins: %s" with compact JSON. No public paste of either line exists: the
lines below are that format filled in, with numbers that obey the file's arithmetic (drafts = the
histogram's sum, drafted = sum of length x count, each rate = accepted at that position / drafts).
"""

import pytest

from exporter.metrics import Metrics
from exporter.parsers.spec_decode import drafts_of, parse_generic
from tests.conftest import SAMPLE, run_lines
from tests.helpers import samples, value

HEAD = "(APIServer pid=53) INFO 08-04 02:59:21 [metrics.py:125] "
# 500 drafts: 12 proposed nothing, 40 two tokens, 448 four: drafted = 80 + 1792 = 1872; accepted at each
# position = rate x 500: 440 + 380 + 300 + 180 = 1300; mean length 1 + 1300/500 = 3.60
DYNAMIC = (HEAD + "SpecDecoding metrics: Mean acceptance length: 3.60, Accepted throughput: 130.00 tokens/s, "
           "Drafted throughput: 187.20 tokens/s, Accepted: 1300 tokens, Drafted: 1872 tokens, "
           "Per-position acceptance rate: 0.880, 0.760, 0.600, 0.360, Draft length histogram: 0:12, 2:40, 4:448, "
           "Avg Draft acceptance rate: 69.4%")
CALIBRATION = (HEAD + 'DSpark STS calibration bins: {"bins":10,"counts":[[0,0,0,0,0,10,20,30,100,328],'
               '[0,0,0,0,0,8,20,30,100,330]],"accepted":[[0,0,0,0,0,4,12,21,85,318],[0,0,0,0,0,2,10,18,80,270]],'
               '"confidence_sums":[[0,0,0,0,0,5.5,13.0,22.5,85.0,311.6],[0,0,0,0,0,4.4,13.0,22.5,85.0,313.5]]}')


def test_the_histogram_is_read_and_gives_the_drafts_exactly():
    _, (ev,) = run_lines([DYNAMIC])
    f = ev.fields
    assert f["draft_length_histogram"] == {0: 12, 2: 40, 4: 448}
    assert drafts_of(f) == 500 and 1 + f["accepted_tokens"] / drafts_of(f) == pytest.approx(3.60)
    assert sum(k * n for k, n in f["draft_length_histogram"].items()) == f["drafted_tokens"]
    # the fast path and the generic splitter agree
    assert parse_generic(DYNAMIC.split("SpecDecoding metrics: ")[1]) == {k: v for k, v in f.items() if k != "engine"}


@pytest.mark.parametrize("bad", ["0:12, two:40", "12", "0:12,, 4:"])
def test_a_garbled_histogram_is_left_out_not_guessed(bad):
    line = DYNAMIC.replace("0:12, 2:40, 4:448", bad)
    _, (ev,) = run_lines([line])
    assert "draft_length_histogram" not in ev.fields and ev.fields["accepted_tokens"] == 1300


def test_drafts_by_length_and_first_position_counters():
    m = Metrics(process_metrics=False)
    m.add_server("s")
    _, events = run_lines([DYNAMIC, DYNAMIC])
    for ev in events:
        m.observe("s", ev)
    s = samples(m.render().decode())
    assert value(s, "vllm_log_spec_decode_drafts_total", server="s", engine="0") == 1000
    for length, n in ((0, 24), (2, 80), (4, 896)):
        assert value(s, "vllm_log_spec_decode_drafts_by_length_total", server="s", engine="0", draft_length=str(length)) == n
    assert value(s, "vllm_log_spec_decode_drafts_by_length_total", server="s", engine="0", draft_length="1") is None
    assert value(s, "vllm_log_spec_decode_position_accepted_tokens_total", server="s", engine="0", position="0") == 880
    assert value(s, "vllm_log_spec_decode_position_accepted_tokens_total", server="s", engine="0", position="3") == 360
    # what VllmDraftAcceptanceCollapsed reads: 880 / (1000 - 24) = 90 %, while all drafted tokens: 69 %
    first = 880 / (1000 - 24)
    assert first > 0.9 and value(s, "vllm_log_spec_decode_draft_acceptance_ratio", server="s", engine="0") < 0.7


def test_dspark_calibration_is_summed_over_positions_per_confidence_bin():
    m = Metrics(process_metrics=False)
    m.add_server("s")
    _, events = run_lines([DYNAMIC, CALIBRATION])
    assert [e.kind for e in events] == ["spec_decode", "spec_calibration"]
    for ev in events:
        m.observe("s", ev)
    s = samples(m.render().decode())
    get = lambda name, conf: value(s, f"vllm_log_spec_decode_confidence_{name}_total", server="s", engine="0",
                                   confidence=conf)
    assert get("drafted_tokens", "0.9-1.0") == 658 and get("accepted_tokens", "0.9-1.0") == 588
    assert get("sum", "0.9-1.0") == pytest.approx(625.1)
    assert get("drafted_tokens", "0.0-0.1") == 0


@pytest.mark.parametrize("payload", ['{"bins":10,"counts":[[1,2]]}', "{not json", '{"bins":"10","counts":[],'
                                     '"accepted":[],"confidence_sums":[]}', '{"bins":10,"counts":[[true]],"accepted":[],'
                                     '"confidence_sums":[]}'])
def test_a_broken_calibration_payload_is_no_event(payload):
    _, events = run_lines([HEAD + "DSpark STS calibration bins: " + payload])
    assert not [e for e in events if e.kind == "spec_calibration"]


def test_the_report_gives_drafts_by_length_first_token_acceptance_and_calibration():
    from exporter.offline.report.stats import RunStats  # noqa: F401 - the report's own path, through the CLI below
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "exporter", "report", str(SAMPLE), "--format", "json", "--year", "2026"],
                       capture_output=True, text=True, timeout=120)
    sd = json.loads(r.stdout)["spec_decode"]
    assert sum(sd["drafts_by_length"].values()) > 0 and set(sd["drafts_by_length"]) <= {str(i) for i in range(6)}
    assert 0.5 < sd["first_token_acceptance"] <= 1
    bins = {b["confidence"]: b for b in sd["calibration"]}
    assert bins["0.9-1.0"]["accepted"] <= bins["0.9-1.0"]["drafted"] and bins["0.0-0.1"]["drafted"] == 0
