"""Numbers and times are checked before use (issue 32 items 3 and 4): a record among good lines never
ends an offline command with a traceback, no stamp outside 2000-2100 reaches an event, and nothing
non-finite or absurd reaches /metrics or backfill's output."""

import json
import math
import subprocess
import sys

import pytest

from exporter.framing.clock import EARLIEST, LATEST, Clock
from exporter.metrics import Metrics
from exporter.parsers._values import LIMIT
from exporter.stream.pipeline import Pipeline
from tests.conftest import FIXTURES, ROOT
from tests.helpers import samples
from tests.hostile import BAD_RECORDS, HOSTILE_NUMBERS, OOM, DIGITS, family_lines, json_record, with_number

GOOD = (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines()


def cli(*args):
    return subprocess.run([sys.executable, "-m", "exporter", *args, "--year", "2026", "--timezone", "UTC"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def report_json(path):
    r = cli("report", str(path), "--format", "json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.mark.parametrize("bad", BAD_RECORDS)
def test_every_offline_command_exits_0_and_keeps_the_good_lines_around_a_bad_record(tmp_path, bad):
    clean, dirty = tmp_path / "clean.log", tmp_path / "dirty.log"
    clean.write_text("\n".join(GOOD) + "\n")
    dirty.write_text("\n".join(GOOD[:16] + [BAD_RECORDS[bad]] + GOOD[16:]) + "\n")
    for cmd in (("parse", str(dirty)), ("parse", "--stats", str(dirty)), ("parse", "--explain", str(dirty)),
                ("compare", str(dirty), str(clean)), ("backfill", str(dirty), "-o", str(tmp_path / "out.om"))):
        r = cli(*cmd)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (cmd, r.stderr[-2000:])
    want, got = report_json(clean), report_json(dirty)
    assert got["config"] == want["config"]
    if bad == "count_5000_digits":  # a stats window whose running count is left out: its other facts count
        assert got["throughput"]["windows"] == want["throughput"]["windows"] + 1
    else:
        assert got["throughput"] == want["throughput"]
    assert EARLIEST <= got["range"]["first"] <= got["range"]["last"] <= LATEST


def test_backfill_of_a_record_stamped_1e308_ends_and_writes_no_sample_outside_2000_2100(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("\n".join(GOOD[:10] + [BAD_RECORDS["timestamp_1e308"]] + GOOD[10:]) + "\n")
    out = tmp_path / "a.om"
    r = cli("backfill", str(log), "-o", str(out))
    assert r.returncode == 0, r.stderr
    stamps = {float(line.rsplit(" ", 1)[1]) for line in out.read_text().splitlines() if not line.startswith("#")}
    assert stamps and all(EARLIEST <= t <= LATEST for t in stamps)


@pytest.mark.parametrize("stamp,want", [
    (1785811440, 1785811440.0),                # seconds
    (1785811440.5, 1785811440.5),
    (1785811440123, 1785811440.123),           # milliseconds (read as seconds: year 58560)
    (1785811440123456, 1785811440.123456),     # microseconds
    (1785811440123456789, 1785811440.123456789),  # nanoseconds (OpenTelemetry)
    ("2026-08-04T02:44:00Z", 1785811440.0),
    (1e308, None), (-5, None), (0, None), (10 ** 40, None), ("0001-01-01T00:00:00Z", None), ("9999-12-31T00:00:00Z", None),
])
def test_a_json_record_s_timestamp_in_any_unit_is_read_as_seconds_and_an_absurd_one_is_dropped(stamp, want):
    line = json.dumps({"message": "hello", "levelname": "WARNING", "timestamp": stamp})
    _, events = Pipeline(Clock(year=2026)).feed(line)
    assert events and all((e.ts is None) if want is None else math.isclose(e.ts, want, abs_tol=1e-3) for e in events)


@pytest.mark.parametrize("text", [
    json_record(OOM, asctime="0001-01-01 00:00:00,000"),
    json_record(OOM, asctime="9999-12-31 23:59:59,999"),
    "2026-08-04T02:44:00Z stdout F " + json_record(OOM).replace("2026-12-04", "0001-01-01"),
    "0001-01-01T00:00:00Z stdout F (APIServer pid=7) ERROR 08-04 02:44:00 [core.py:1] " + OOM,
    "[0001-01-01T00:00:00Z] (APIServer pid=7) ERROR 08-04 02:44:00 [core.py:1] " + OOM,
    "0001-01-01 00:00:00.000 | (APIServer pid=7) ERROR 08-04 02:44:00 [core.py:1] " + OOM,
    "0001-01-01 00:00:00 ERROR 56542 [core.py:64] " + OOM,
    "0001-01-01 00:00:00 - vllm.engine - ERROR - " + OOM,
])
def test_a_stamp_of_year_1_or_9999_in_any_wrapper_is_no_time(text):
    for clock in (Clock(year=2026), Clock(year=2026, tz=__import__("zoneinfo").ZoneInfo("America/New_York"))):
        _, events = Pipeline(clock).feed(text)
        assert events and all(e.ts is None or EARLIEST <= e.ts <= LATEST for e in events)


def _bounded(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float, list, dict)):
        return True
    if isinstance(v, list):
        return all(map(_bounded, v))
    if isinstance(v, dict):
        return all(map(_bounded, v.values()))
    return -LIMIT <= v <= LIMIT


def test_every_number_of_every_family_s_lines_made_hostile_raises_nothing_and_stays_bounded():
    """Each run of digits of each line shape the fixtures hold, replaced by each hostile number: no
    exception (there were 20 parser sites), and every event's numbers within LIMIT."""
    bad = []
    for line in family_lines():
        for i in range(len(DIGITS.findall(line))):
            for number in HOSTILE_NUMBERS:
                text = with_number(line, i, number)
                p = Pipeline(Clock(year=2026))
                try:
                    events = p.feed(text)[1] + p.flush()
                except Exception as e:  # noqa: BLE001 - collected, the test lists them all
                    bad.append((type(e).__name__, text[:200]))
                    continue
                for ev in events:
                    if not _bounded(ev.fields) or not (ev.ts is None or EARLIEST <= ev.ts <= LATEST):
                        bad.append(("unbounded", ev.kind, text[:200]))
    assert not bad, f"{len(bad)} hostile lines: {bad[:10]}"


def test_nothing_non_finite_or_absurd_reaches_metrics():
    """The records that made `vllm_log_last_error_timestamp_seconds{kind="oom"} +Inf` and a start
    stamped 1e+299, and hostile numbers in the periodic lines, then /metrics' text."""
    m = Metrics(process_metrics=False)
    p = Pipeline(Clock(year=2026))
    lines = list(BAD_RECORDS.values()) + [
        json.dumps({"message": OOM, "levelname": "ERROR", "timestamp": float("inf")}),
        json.dumps({"message": "vLLM API server version 0.11.0", "levelname": "INFO", "timestamp": 1e299 * 1e9}),
    ]
    for line in family_lines():
        n = len(DIGITS.findall(line))
        lines += [with_number(line, i, num) for i in range(n) for num in ("9" * 400, "9" * 25, "1e308")]
    for line in lines:
        _, events = p.feed(line)
        m.observe_many("s", events)
    m.observe_many("s", p.flush())
    for (name, labels), v in samples(m.render().decode()).items():
        assert math.isfinite(v) and abs(v) <= LIMIT, (name, dict(labels), v)
        if name.endswith("_timestamp_seconds") and v:
            assert EARLIEST <= v <= LATEST, (name, dict(labels), v)
