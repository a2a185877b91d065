"""Kubernetes node logs (CRI format): the tag is a wrapper, split lines are joined per stream."""

from datetime import datetime, timezone

from hypothesis import given, settings, strategies as st

from exporter.framing.cri import CriJoiner
from exporter.framing.clock import Clock
from exporter.framing.frame import frame_line
from exporter.stream.pipeline import Pipeline
from tests.conftest import SAMPLE

STAMP = "2026-08-04T02:45:03.123456789Z"
OOM = ("(EngineCore_DP0 pid=312) ERROR 08-04 02:45:03 [core.py:710] torch.OutOfMemoryError: CUDA out of memory. "
       "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.10 GiB is free.")


def test_cri_tag_is_a_wrapper_and_the_process_tag_survives():
    f = frame_line(f"{STAMP} stderr F {OOM}", Clock(year=2026))
    assert f.process == "EngineCore_DP0" and f.pid == 312 and f.level == "ERROR"
    assert f.ts_source == "rfc3339" and f.message.startswith("torch.OutOfMemoryError")


def test_partial_records_join_with_their_full_record_per_stream():
    j = CriJoiner()
    out = j.feed([f"{STAMP} stderr P {OOM[:40]}", f"{STAMP} stdout F other line",
                  "2026-08-04T02:45:03.2Z stderr P " + OOM[40:90]])
    assert out == [f"{STAMP} stdout F other line"]
    out = j.feed(["2026-08-04T02:45:03.3Z stderr F " + OOM[90:]])
    assert out == [f"{STAMP} stderr F {OOM}"] and not j.pending
    assert j.feed(["plain line with stdout P in it"]) == ["plain line with stdout P in it"]
    j.feed([f"{STAMP} stdout P never closed"])
    assert j.flush() == [f"{STAMP} stdout F never closed"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(OOM) - 1), max_size=6, unique=True),
       st.integers(min_value=0, max_value=3), st.integers(min_value=1, max_value=5))
def test_any_split_counts_as_the_one_line_it_was(cuts, noise_at, batch):
    pieces = [OOM[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(OOM)])]
    records = [f"{STAMP} stderr {'P' if i < len(pieces) - 1 else 'F'} {p}" for i, p in enumerate(pieces)]
    access = f'{STAMP} stdout F (APIServer pid=53) INFO:     127.0.0.1:1 - "GET /v1/models HTTP/1.1" 200 OK'
    records.insert(min(noise_at, len(records) - 1), access)  # the other stream goes on meanwhile
    want = Pipeline(Clock(year=2026))
    _, want_events, _, _ = want.feed_batch([access, f"{STAMP} stderr F {OOM}"])
    p = Pipeline(Clock(year=2026))
    counts, events, accesses = {"parsed": 0, "ignored": 0, "unparsed": 0}, [], {}
    for i in range(0, len(records), batch):
        c, ev, acc, _ = p.feed_batch(records[i:i + batch])
        for k, n in c.items():
            counts[k] += n
        events += ev
        for k, n in acc.items():
            accesses[k] = accesses.get(k, 0) + n
    events += p.flush(None)
    assert counts == {"parsed": 2, "ignored": 0, "unparsed": 0}
    assert [(e.kind, e.fields) for e in events if e.kind != "access_log"] == [
        (e.kind, e.fields) for e in want_events if e.kind != "access_log"]
    assert sum(accesses.values()) + sum(e.kind == "access_log" for e in events) == 1


def test_sample_log_in_cri_form_gives_what_the_plain_log_gives():
    plain = SAMPLE.read_text().splitlines()
    cri = []
    clock, ts = Clock(year=2026), 0.0
    for i, line in enumerate(plain):
        # the runtime's own stamp, as kubelet would write it: the time the line was printed
        ts = frame_line(line, clock).ts or ts
        STAMP = datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        stream = "stderr" if i % 3 else "stdout"
        if len(line) > 60 and i % 2:
            cri += [f"{STAMP} {stream} P {line[:30]}", f"{STAMP} {stream} P {line[30:60]}",
                    f"{STAMP} {stream} F {line[60:]}"]
        else:
            cri.append(f"{STAMP} {stream} F {line}")

    def run(lines):
        p = Pipeline(Clock(year=2026))
        counts, kinds = {}, {}
        for i in range(0, len(lines), 100):
            c, ev, acc, _ = p.feed_batch(lines[i:i + 100])
            for k, n in c.items():
                counts[k] = counts.get(k, 0) + n
            for e in ev:
                kinds[e.kind] = kinds.get(e.kind, 0) + 1
            kinds["access_log"] = kinds.get("access_log", 0) + sum(acc.values())
        for e in p.flush(None):
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        return counts, kinds

    assert run(cri) == run(plain)
