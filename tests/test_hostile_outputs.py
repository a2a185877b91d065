"""Text is text in every output (exporter.framing.text): the fixtures' lines with hostile bytes put in at
random places (lone surrogates as JSON escapes, NULs, BOMs, C0 and C1 controls, terminal escapes, CR
alone, bytes that are not UTF-8, Markdown and chat markup) go through the daemon's way in (bytes, the
line splitter, the stream) and out through every output: Prometheus labels and OpenMetrics, the
report's JSON, Markdown and HTML, `parse`'s JSON, and the alerts pushed to Alertmanager. None may fail,
none may carry a control character where it would act, no Markdown table may gain a column, no HTML
or chat markup may come from the log."""

from __future__ import annotations

import json
import re

from hypothesis import HealthCheck, given, settings, strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from exporter.alerts.from_events import Alerts
from exporter.framing.clock import Clock
from exporter.framing.lines import LineSplitter
from exporter.metrics import Metrics
from exporter.offline.report import markdown
from exporter.offline.report.html import _markdown_to_html
from exporter.offline.report.stats import RunStats
from exporter.stream.pipeline import Pipeline
from tests.hostile import family_lines, json_record
from tests.test_fuzz import examples

SHAPES = family_lines()
# lines whose text reaches an output as text: a label (version, model), an error's first message in
# the report, an alert's description, a `log` event
TEXT_KINDS = {"version", "engine_config", "oom", "engine_death", "cuda_error", "nccl_error", "log", "request_error",
              "start_failed", "startup_failure", "model_load", "tool_call_parser_failure"}


def _kinds(line: str) -> set[str]:
    p = Pipeline(Clock(year=2026))
    return {e.kind for e in p.feed(line)[1] + p.flush()}


TARGETS = [line for line in SHAPES if _kinds(line) & TEXT_KINDS]
# what a hostile writer puts in, as bytes: each with a defined treatment
HOSTILE = [b"\\ud800", b"\\udfff", b"\\u0000", b"\x00", b"\x00" * 64, b"\xef\xbb\xbf", b"\x1b]0;pwned\x07",
           b"\x1b]52;c;cHduZWQ=\x07", b"\x1b[2J", b"\xc2\x9b31m", b"\xc2\x85", b"\x7f", b"\r", b"\xff\xfe", b"\xed\xa0\x80",
           b"|", b"<img src=x onerror=alert(1)>", b"<!channel>", b"@here", b"`", b"[x](javascript:alert(1))",
           b"\xe2\x80\xa8"]
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def spoiled(line: str, piece: bytes, at: int, as_json: bool) -> bytes:
    """``line`` (as a JSON record, or as it is) with ``piece`` put in ``at`` characters from its end
    (where the parsed values are: a version, a model, an error's words)."""
    if as_json:
        from exporter.framing.frame import frame_line

        f = frame_line(line, Clock(year=2026))
        raw = json_record(f.message, levelname=f.level or "ERROR", name="vllm." + (f.logger or "x").split(".")[0]).encode()
        cut = raw.rindex(b'", "vllm_process_name"') if b'"vllm_process_name"' in raw else len(raw)
        i = raw.rfind(b'"', 0, raw.find(b'", ', raw.find(b'"message": "')) + 1) if False else None
        msg_end = raw.index(b'", "vllm_process_name"')
        i = max(raw.index(b'"message": "') + 12, msg_end - at)
        return raw[:i] + piece + raw[i:]
    raw = line.encode("utf-8")
    i = max(0, len(raw) - at)
    return raw[:i] + piece + raw[i:]


@st.composite
def hostile_log(draw) -> bytes:
    lines = draw(st.lists(st.one_of(st.sampled_from(TARGETS), st.sampled_from(SHAPES)), min_size=3, max_size=12))
    out = []
    for line in lines:
        as_json = draw(st.booleans())  # as one of vLLM's JSON records (its escapes decoded by framing)
        raw = spoiled(line, b"", 0, as_json)
        for _ in range(draw(st.integers(0, 3))):
            near_end = draw(st.booleans())
            at = draw(st.integers(0, 40)) if near_end else draw(st.integers(0, len(raw)))
            piece = draw(st.sampled_from(HOSTILE))
            if as_json and piece.startswith(b"\\u"):
                raw = spoiled(line, piece, at, True)  # (an escape inside the record's message)
            else:
                i = max(0, len(raw) - at)
                raw = raw[:i] + piece + raw[i:]
        out.append(raw)
    return b"\n".join(out) + b"\n"


def _labels_clean(families) -> None:
    for fam in families:
        for s in fam.samples:
            for v in s.labels.values():
                assert not CONTROLS.search(v), (s.name, v)


@settings(max_examples=examples(60), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_log(), st.integers(1, 4096))
def test_hostile_bytes_in_the_fixtures_lines_reach_no_output_as_markup_or_a_failure(data, chunk):
    check(data, chunk)


def test_each_hostile_piece_in_each_text_line_s_value_reaches_no_output_as_markup_or_a_failure():
    """Every piece, a few characters before the end of every line whose text reaches an output (inside
    its version, model or error words), plain and as a JSON record."""
    assert len(TARGETS) >= 20
    for piece in HOSTILE:
        for as_json in (False, True):
            if piece.startswith(b"\\u") and not as_json:
                continue
            data = b"\n".join(spoiled(line, piece, 3, as_json) for line in TARGETS) + b"\n"
            check(data, 1 << 17)


def check(data: bytes, chunk: int) -> None:
    split = LineSplitter("fuzz")
    lines: list[str] = []
    for i in range(0, len(data), chunk):
        lines += split.feed(data[i:i + chunk])
    lines += split.flush(final=True)
    for line in lines:
        assert "\x00" not in line and "\ufeff" not in line[:1] and not re.search("[\ud800-\udfff]", line)
    p = Pipeline(Clock(year=2026))
    counts, events, access, span = p.feed_batch(lines)
    events += p.flush()
    for ev in events:  # parse's output, and the text every other output is made of
        json.dumps(ev.to_dict(), ensure_ascii=False).encode("utf-8")
    # Prometheus: the text format and OpenMetrics, as a scraper parses them
    m = Metrics(process_metrics=False)
    m.add_server("s")
    m.observe_many("s", events)
    m.observe_access("s", access)
    _labels_clean(text_string_to_metric_families(m.render().decode("utf-8")))
    _labels_clean(openmetrics_families(m.render_openmetrics().decode("utf-8")))
    # the alerts a receiver gets (Slack reads <!channel>, <url|text>; a terminal reads escapes)
    alerts = Alerts(instance="h:1")
    alerts.observe("s", events, now=1.8e9)
    for a in alerts.pending(now=1.8e9):
        body = json.dumps(a.to_api(), ensure_ascii=False).encode("utf-8")
        for v in a.annotations.values():
            assert "<" not in v and ">" not in v and not CONTROLS.search(v.replace("\n", "")), v
            assert not re.search(r"@(here|channel|everyone)\b", v), v
        json.loads(body)
    # the report: its JSON, its Markdown (no control character, no column added, no HTML), its HTML page
    stats = RunStats()
    for ev in events:
        stats.add(ev)
    stats.add_access(access, span)
    summary = stats.summary()
    json.dumps(summary, ensure_ascii=False).encode("utf-8")
    md = markdown.render(summary, "run", None)
    assert not CONTROLS.search(md.replace("\n", "")), repr(md[:200])
    table = None
    for row in md.splitlines() + [""]:
        if row.startswith("|"):
            cells = len(re.findall(r"(?<!\\)\|", row))
            table = cells if table is None else table
            assert cells == table, row
        else:
            table = None
        assert not re.search(r"(?<!\\)<[a-zA-Z!/]", row), row
    page = _markdown_to_html(md, {})
    assert not re.search(r"<(?!/?(?:h1|h2|p|table|thead|tbody|tr|th|td)>)", page), page[:500]
