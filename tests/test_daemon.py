"""The real daemon as a subprocess, following a real file, read over real HTTP."""

import os

from tests.conftest import SAMPLE
from tests.helpers import ROOT, Exporter, ceiling, families_without_a_sample, http_get, readme_demo_leaves_empty, wait_until

STATS = ("Aug 04 02:46:{s:02d} h vllm[1]: (APIServer pid=53) INFO 08-04 02:46:{s:02d} [loggers.py:314] Engine 000: "
         "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {g} tokens/s, Running: 1 reqs, "
         "Waiting: 0 reqs, GPU KV cache usage: 1.9%, Prefix cache hit rate: 88.1%")
ACCESS = 'Aug 04 02:50:28 h vllm[1]: (APIServer pid=53) INFO:     10.10.10.2:52922 - "POST /v1/chat/completions HTTP/1.1" {code} OK'


def append(path, *lines):
    with open(path, "a") as f:
        f.write("".join(l + "\n" for l in lines))


def lines_total(ex, server):
    return sum(ex.value("vllm_log_exporter_lines_total", server=server, result=r) or 0 for r in ("parsed", "ignored", "unparsed"))


def test_follow_file_through_rotation_and_truncation(tmp_path):
    log = tmp_path / "grandpa.log"
    log.write_text("")
    with Exporter("--source", str(log), "--year", "2026") as ex:
        append(log, STATS.format(s=9, g=359.0), ACCESS.format(code=200), "garbage that is no vLLM line")
        wait_until(lambda: ex.value("vllm_log_generation_throughput_tokens_per_second", server="grandpa") == 359.0,
                   what="throughput gauge")
        assert ex.value("vllm_log_http_requests_total", server="grandpa", status="200",
                        endpoint="/v1/chat/completions", method="POST") == 1
        assert ex.value("vllm_log_exporter_lines_total", server="grandpa", result="unparsed") == 1
        assert ex.value("vllm_log_exporter_source_up", server="grandpa") == 1

        os.rename(log, tmp_path / "grandpa.log.1")
        append(tmp_path / "grandpa.log.1", ACCESS.format(code=500))
        append(log, ACCESS.format(code=429))
        wait_until(lambda: ex.value("vllm_log_http_requests_total", server="grandpa", status="429") == 1, what="429 after rotation")
        assert ex.value("vllm_log_http_requests_total", server="grandpa", status="500") == 1

        with open(log, "w"):
            pass  # copytruncate
        wait_until(lambda: ex.value("vllm_log_exporter_source_restarts_total", server="grandpa") == 2, what="truncation seen")
        append(log, STATS.format(s=19, g=100.0))
        wait_until(lambda: ex.value("vllm_log_generation_throughput_tokens_per_second", server="grandpa") == 100.0,
                   what="gauge after truncation")
        # every line read is accounted: 3 + 1 + 1 + 1 = 6
        assert lines_total(ex, "grandpa") == 6
        status, page = http_get(ex.url + "/")
        assert status == 200 and 'href="/metrics"' in page and "grandpa: up" in page


def test_from_start_reads_the_whole_sample_and_accounts_every_line(tmp_path):
    n = SAMPLE.read_text(encoding="utf-8").count("\n")
    with Exporter("--source", f"gp={SAMPLE}", "--from-start", "--year", "2026") as ex:
        wait_until(lambda: lines_total(ex, "gp") == n, what=f"{n} lines")
        assert ex.value("vllm_log_exporter_lines_total", server="gp", result="unparsed") == 0
        # 3 tracebacks, each an OOM, CUDA error or dead engine (counted as those), and 2 deaths
        wait_until(lambda: ex.value("vllm_log_exporter_events_total", server="gp", kind="traceback") == 3,
                   what="3 tracebacks")
        assert ex.value("vllm_log_errors_total", server="gp", kind="traceback") == 0
        assert ex.value("vllm_log_errors_total", server="gp", kind="engine_dead") == 2
        assert ex.value("vllm_log_errors_total", server="gp", kind="oom") == 1
        assert ex.value("vllm_log_server_starts_total", server="gp") == 3
        assert ex.value("vllm_log_kv_cache_tokens", server="gp") == 285336


def test_a_first_try_on_an_existing_file_says_it_starts_at_the_end_and_how_to_read_it(tmp_path):
    """Pointed at a file that already holds a run, the exporter starts at its end: its log says so,
    with what it skipped and the flag that reads it, instead of only "listening" over zeros."""
    import json

    log = tmp_path / "grandpa.log"
    log.write_text(SAMPLE.read_text(encoding="utf-8"))
    ex = Exporter("--source", str(log), "--year", "2026").start()
    try:
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="grandpa") == 1, what="source up")
    finally:
        err = ex.stop()
    said = [e for e in (json.loads(line) for line in err.splitlines() if line.startswith("{"))
            if e["event"].startswith("reading")]
    assert len(said) == 1, err
    assert said[0]["event"] == "reading starts at the end of the file: the lines already in it are not read"
    assert said[0]["skipped_bytes"] == log.stat().st_size and "--from-start" in said[0]["hint"]


def test_stdin_source(tmp_path):
    import subprocess
    import sys

    from tests.helpers import ROOT, free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--source", "-", "--server", "piped",
                             "--web.listen-address", f"127.0.0.1:{port}", "--log.format", "json"],
                            cwd=ROOT, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdin.write(ACCESS.format(code=404) + "\n")
        proc.stdin.flush()
        from tests.helpers import value

        wait_until(lambda: value(http_get(f"http://127.0.0.1:{port}/metrics")[1], "vllm_log_http_requests_total",
                                 server="piped", status="404") == 1, what="404 via stdin")
        proc.stdin.close()  # end of input: the source goes down, the exporter keeps serving
        wait_until(lambda: value(http_get(f"http://127.0.0.1:{port}/metrics")[1], "vllm_log_exporter_source_up",
                                 server="piped") == 0, what="source down at EOF")
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)


def test_bad_config_refused_at_start_with_the_key_named(tmp_path):
    import subprocess
    import sys

    from tests.helpers import ROOT

    cfg = tmp_path / "c.yaml"
    cfg.write_text("sources:\n  - {name: a, type: file, pathh: /x}\n")
    r = subprocess.run([sys.executable, "-m", "exporter", "--config", str(cfg)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == f"vllm-log-exporter: {cfg}: sources[0].pathh: unknown key (expected one of: from_start, name, path, server_label, type)"


def test_demo_replays_the_sample_with_live_timestamps():
    import time

    started = time.time()
    with Exporter("--demo", "--demo-speed", "200") as ex:
        wait_until(lambda: (ex.value("vllm_log_spec_decode_accepted_tokens_total", server="demo") or 0) > 0,
                   30, 0.2, what="spec-decode tokens from the demo")
        assert ex.value("vllm_log_kv_cache_tokens", server="demo") == 285336
        assert ex.value("vllm_log_exporter_lines_total", server="demo", result="unparsed") == 0
        # timestamps are moved to now: the errors' times are recent, not the sample's August date
        wait_until(lambda: ex.value("vllm_log_errors_total", server="demo", kind="oom") == 1, 60, 0.2, what="demo OOM")
        assert started - 1 <= ex.value("vllm_log_last_error_timestamp_seconds", server="demo", kind="oom") <= time.time()


def test_metrics_are_served_in_the_text_format_gzipped_when_asked(tmp_path):
    import gzip
    import urllib.request

    with Exporter("--source", f"gp={SAMPLE}", "--from-start", "--year", "2026") as ex:
        wait_until(lambda: lines_total(ex, "gp") > 0, what="first lines")
        req = urllib.request.Request(ex.url + "/metrics", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=ceiling(10)) as resp:
            assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            assert resp.headers["Content-Encoding"] == "gzip"
            body = gzip.decompress(resp.read()).decode()
        assert "# TYPE vllm_log_http_requests_total counter" in body and "process_resident_memory_bytes" in body
        for refused in ("gzip;q=0", "identity", ""):
            req = urllib.request.Request(ex.url + "/metrics", headers={"Accept-Encoding": refused})
            with urllib.request.urlopen(req, timeout=ceiling(10)) as resp:
                assert resp.headers.get("Content-Encoding") is None, refused
                assert b"# TYPE vllm_log_http_requests_total counter" in resp.read()
        # Prometheus' own Accept header takes the text format too, and gets it
        prom_accept = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                       "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
        req = urllib.request.Request(ex.url + "/metrics", headers={"Accept": prom_accept})
        with urllib.request.urlopen(req, timeout=ceiling(10)) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        # a scraper that takes OpenMetrics only gets OpenMetrics, the same samples
        req = urllib.request.Request(ex.url + "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        with urllib.request.urlopen(req, timeout=ceiling(10)) as resp:
            assert resp.headers["Content-Type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
            om = resp.read().decode()
        assert om.endswith("# EOF\n") and "# TYPE vllm_log_http_requests counter" in om
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om

        om_samples = {(s.name, frozenset(s.labels.items())) for f in parse_om(om) for s in f.samples}
        assert ("vllm_log_kv_cache_tokens", frozenset({("server", "gp"), ("engine", "0"), ("device", "gpu")})) in om_samples


def test_the_telemetry_path_is_taken_literally():
    with Exporter("--demo", "--web.telemetry-path", "/metrics/{x}") as ex:
        status, body = http_get(ex.url + "/metrics/%7Bx%7D")
        assert status == 200 and "vllm_log_exporter_build_info" in body
        assert http_get(ex.url + "/metrics/anything")[0] == 404


def test_window_gauges_read_idle_after_two_stats_intervals_without_a_line(tmp_path):
    log = tmp_path / "grandpa.log"
    log.write_text("")
    # 3 s intervals: the busy gauge stands 6 s, long enough to be seen on a loaded machine
    with Exporter("--source", str(log), "--year", "2026", "--stats-interval", "3") as ex:
        append(log, STATS.format(s=9, g=359.0))
        wait_until(lambda: ex.value("vllm_log_generation_throughput_tokens_per_second", server="grandpa") == 359.0,
                   what="throughput gauge")
        assert ex.value("vllm_log_requests_running", server="grandpa") == 1
        # vLLM logs nothing while idle: after 2 x 3 s the engine reads idle, not its last busy window
        wait_until(lambda: ex.value("vllm_log_generation_throughput_tokens_per_second", server="grandpa") == 0, 10,
                   what="idle throughput")
        assert ex.value("vllm_log_requests_running", server="grandpa") == 0
        assert ex.value("vllm_log_kv_cache_usage_ratio", server="grandpa") == 0.019  # not a rate: kept
        append(log, STATS.format(s=19, g=120.0))
        wait_until(lambda: ex.value("vllm_log_generation_throughput_tokens_per_second", server="grandpa") == 120.0,
                   what="busy again")


def test_the_default_demo_shows_every_family():
    """What someone trying the product sees first, at the default speed. How soon (its first pass plays
    in 30 s) is measured by bench/demo_first_pass.py: a loaded machine is slower, and a test waits."""
    with Exporter("--demo") as ex:
        def every_family():
            m = ex.metrics()
            from tests.helpers import value as v

            return all((v(m, name, server="demo", **labels) or 0) > 0 for name, labels in (
                ("vllm_log_generation_throughput_tokens_per_second", {}),
                ("vllm_log_spec_decode_accepted_tokens_total", {}),
                ("vllm_log_kv_offload_bytes_total", {"direction": "store"}),
                ("vllm_log_kv_offload_bytes_total", {"direction": "load"}),
                ("vllm_log_http_requests_total", {"status": "200"}),
                ("vllm_log_http_requests_total", {"status": "500"}),
                ("vllm_log_errors_total", {"kind": "oom"}),
                ("vllm_log_errors_total", {"kind": "engine_dead"}),
                ("vllm_log_kv_cache_tokens", {}),
            )) and v(m, "vllm_log_server_starts_total", server="demo") >= 2
        wait_until(every_family, 40, 0.5, what="every family from the demo")
        # and its second server offloads with LMCache
        wait_until(lambda: (ex.value("vllm_log_lmcache_bytes_total", server="demo-lmcache", direction="retrieve") or 0) > 0
                   and (ex.value("vllm_log_lmcache_hit_tokens_total", server="demo-lmcache") or 0) > 0, 10, 0.5,
                   what="LMCache from the demo")
        # After the first pass (each server has read its whole sample), every declared family has a sample
        # but those docs/demo.md says the demo does not show (and why).
        lines = {server: len((ROOT / "exporter" / "data" / sample).read_text(encoding="utf-8").splitlines())
                 for server, sample in (("demo", "sample.log"), ("demo-lmcache", "sample-lmcache.log"),
                                        ("demo-v0", "sample-v0.log"))}
        wait_until(lambda: all((ex.value("vllm_log_exporter_lines_total", server=s) or 0) >= n for s, n in lines.items()),
                   40, 0.5, what="the demo's first pass")
        assert families_without_a_sample(http_get(ex.url + "/metrics")[1]) == readme_demo_leaves_empty()
        # and it said nothing a user should act on: the demo's own replay is no reason for a warning
        said = ex.stop()
        warnings = [line for line in said.splitlines() if '"level": "warning"' in line or '"level": "error"' in line]
        assert not warnings, "\n".join(warnings)


def test_a_busy_engine_that_stops_logging_reads_stalled_and_an_idle_one_does_not(tmp_path):
    log = tmp_path / "grandpa.log"
    log.write_text("")
    idle_window = STATS.replace("Avg generation throughput: {g} tokens/s, Running: 1 reqs",
                                "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs").replace("Engine 000", "Engine 001")
    with Exporter("--source", str(log), "--year", "2026", "--stats-interval", "0.5") as ex:
        append(log, STATS.format(s=9, g=359.0), idle_window.format(s=9))
        # (the windows counter, not the stalled gauge, says they were read: 1.5 s later the gauge moves)
        wait_until(lambda: ex.value("vllm_log_stats_windows_total", server="grandpa") == 2, what="two windows")
        # engine 0's last window was busy: after 3 x 0.5 s of silence it is stalled; engine 1 was idle
        wait_until(lambda: ex.value("vllm_log_engine_stalled", server="grandpa", engine="0") == 1, 10,
                   what="engine 0 stalled")
        assert ex.value("vllm_log_engine_stalled", server="grandpa", engine="1") == 0
        # it speaks again (an idle window: a busy one would stall again 1.5 s later, maybe before we look)
        append(log, idle_window.replace("Engine 001", "Engine 000").format(s=19))
        wait_until(lambda: ex.value("vllm_log_engine_stalled", server="grandpa", engine="0") == 0, 10,
                   what="engine 0 working again")


def test_healthz_says_why_a_servers_engine_metrics_are_missing(tmp_path):
    """vLLM with data parallel and several API servers logs no stats line at all (issue 24): the
    exporter says so where an operator looks first, beside the metric."""
    import json

    from tests.helpers import http_get
    from tests.test_parsers import STATS_OFF

    log = tmp_path / "dp.log"
    log.write_text(f"(ApiServer_1 pid=15701) WARNING 12-04 15:38:10 [loggers.py:1386] {STATS_OFF}\n")
    with Exporter("--source", f"dp={log}", "--from-start") as ex:
        wait_until(lambda: ex.value("vllm_log_stats_logging_disabled", server="dp", reason="api_server_count") == 1,
                   10, what="the metric")
        health = json.loads(http_get(ex.url + "/healthz")[1])
        assert health["status"] == "ok" and "--api-server-count 1" in health["servers"]["dp"]


def test_a_source_in_a_directory_that_does_not_exist_is_a_warning_and_healthz_says_waiting(tmp_path):
    """A mistyped --source: said at once, and /healthz names it, until the file comes."""
    import json

    path = tmp_path / "vlm" / "vllm.log"
    ex = Exporter("--source", f"a={path}").start()
    try:
        health = wait_until(lambda: (h := json.loads(http_get(ex.url + "/healthz")[1]))["status"] == "waiting" and h,
                            10, what="/healthz waiting")
        assert health["waiting"] == {"a": f"no such directory: {tmp_path / 'vlm'}"}, health
        path.parent.mkdir()
        path.write_text(STATS.format(s=1, g="12.0") + "\n")
        wait_until(lambda: json.loads(http_get(ex.url + "/healthz")[1])["status"] == "ok", 10, what="/healthz ok")
    finally:
        said = ex.stop()
    warnings = [json.loads(line) for line in said.splitlines() if '"level": "warning"' in line]
    assert [w["event"] for w in warnings] == ["the file's directory does not exist: is the path right?"], said[-2000:]
    assert warnings[0]["directory"] == str(tmp_path / "vlm")
