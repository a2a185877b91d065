"""`report` against logs whose answers were worked out by hand, and against the seed's quoted lines."""

import json
import shutil
import subprocess
import sys

import pytest

from exporter.framing.clock import Clock
from exporter.offline.report.series import Tally
from exporter.offline.report.stats import RunStats
from tests.conftest import FIXTURES, ROOT, run_lines

GIB = 2**30


def stats_of(lines, **kw) -> dict:
    _, events = run_lines(lines)
    s = RunStats(**kw)
    for ev in events:
        s.add(ev)
    return s.summary()


def stats_line(sec, gen, running, prompt=0.0, kv=10.0):
    return (f"INFO 08-04 10:{sec // 60:02d}:{sec % 60:02d} [loggers.py:1] Engine 000: Avg prompt throughput: {prompt} tokens/s, "
            f"Avg generation throughput: {gen} tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
            f"GPU KV cache usage: {kv}%, Prefix cache hit rate: 50.0%")


def spec_line(sec, length, rate, accepted_tps):
    return (f"INFO 08-04 10:{sec // 60:02d}:{sec % 60:02d} [metrics.py:1] SpecDecoding metrics: Mean acceptance length: "
            f"{length}, Accepted throughput: {accepted_tps} tokens/s, Drafted throughput: 1.0 tokens/s, Accepted: 1 "
            f"tokens, Drafted: 2 tokens, Per-position acceptance rate: {rate / 100:.3f}, 0.500, Avg Draft acceptance rate: {rate}%")


def kv_line(sec, direction, nbytes, secs):
    return (f"INFO 08-04 10:{sec // 60:02d}:{sec % 60:02d} [metrics.py:1] KV Transfer metrics: "
            f"vllm:kv_offload_{direction}_bytes={nbytes}, vllm:kv_offload_{direction}_time={secs}")


def tally(xs) -> Tally:
    t = Tally()
    for x in xs:
        t.add(x)
    return t


def test_tukey_hinges_by_hand():
    assert tally([100, 200, 300, 400, 500]).hinges() == (200, 400)  # odd: both halves hold the median
    assert tally([1, 2, 3, 4]).hinges() == (1.5, 3.5)
    assert tally([7]).hinges() == (7, 7)
    assert tally([3, 1, 2]).median() == 2 and tally([4, 1, 3, 2]).median() == 2.5 and tally([]).median() is None


def test_throughput_figures():
    lines = [stats_line(0, 300.0, 1), stats_line(10, 100.0, 1), stats_line(20, 500.0, 1, prompt=4000.0, kv=79.4),
             stats_line(30, 200.0, 1), stats_line(40, 400.0, 1), stats_line(50, 1000.0, 2), stats_line(60, 0.0, 0)]
    t = stats_of(lines)["throughput"]
    assert t["windows"] == 7 and t["generation_peak"] == 1000.0
    assert t["single_request_windows"] == 5 and t["single_request_median"] == 300.0
    assert t["single_request_iqr"] == [200.0, 400.0]
    assert t["nonzero_windows"] == 6 and t["nonzero_mean"] == pytest.approx(2500 / 6)
    assert t["prompt_peak"] == 4000.0 and t["gpu_kv_usage_peak"] == 0.794 and t["prefix_cache_hit_peak"] == 0.5


def test_spec_decode_figures():
    lines = [spec_line(0, 2.0, 50.0, 100.0), spec_line(10, 4.0, 90.0, 300.0), spec_line(20, 3.0, 70.0, 200.0),
             spec_line(30, 3.5, 41.9, 150.0)]
    sd = stats_of(lines)["spec_decode"]
    assert sd["windows"] == 4
    assert sd["acceptance_length"] == {"median": 3.25, "mean": 3.125, "best": 4.0}
    assert sd["draft_acceptance"]["median"] == pytest.approx(0.6)
    assert sd["draft_acceptance"]["mean"] == pytest.approx((0.5 + 0.9 + 0.7 + 0.419) / 4)
    assert (sd["draft_acceptance"]["best"], sd["draft_acceptance"]["worst"]) == (0.9, 0.419)
    assert sd["accepted_throughput"] == {"median": 175.0, "best": 300.0}
    assert sd["per_position_mean"] == pytest.approx([(0.5 + 0.9 + 0.7 + 0.419) / 4, 0.5])


def test_kv_offload_figures():
    lines = [kv_line(0, "store", 1_000_000_000, 0.02), kv_line(10, "store", 3_000_000_000, 0.05),
             kv_line(20, "load", 500_000_000, 0.01)]
    kv = stats_of(lines)["kv_offload"]
    st = kv["store"]
    assert st["weighted_gb_per_s"] == pytest.approx(4 / 0.07)
    assert (st["min_gb_per_s"], st["max_gb_per_s"]) == (pytest.approx(50.0), pytest.approx(60.0))
    assert st["largest_interval"] == {"bytes": 3e9, "ms": pytest.approx(50.0), "gb_per_s": pytest.approx(60.0)}
    assert kv["load"]["weighted_gb_per_s"] == pytest.approx(50.0)


def test_seed_article_offload_intervals():
    lines = (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines()
    kv = stats_of(lines)["kv_offload"]
    # "1,415,335,680 bytes in 0.027173 s is 52.09 GB/s"; "185,264,640 bytes in 0.003374 s is 54.91 GB/s"
    assert kv["store"]["largest_interval"]["bytes"] == 1415335680
    assert kv["store"]["largest_interval"]["ms"] == pytest.approx(27.17, abs=0.01)
    assert kv["store"]["largest_interval"]["gb_per_s"] == pytest.approx(52.09, abs=0.005)
    assert kv["load"]["largest_interval"]["gb_per_s"] == pytest.approx(54.91, abs=0.005)
    assert kv["load"]["largest_interval"]["ms"] == pytest.approx(3.37, abs=0.01)


def test_capacity_figures_as_the_seed_worked_them_out():
    lines = (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines()
    # the article quotes TP0's KV memory line only; add TP1's, as the real log has it
    lines.append(lines[8].replace("Worker_TP0 pid=264", "Worker_TP1 pid=265"))
    cap = stats_of(lines)["capacity"]
    assert cap["kv_cache_bytes_total"] / GIB == pytest.approx(17.18, abs=0.01)
    assert cap["kv_bytes_per_token"] == pytest.approx(17.18 * GIB / 285336, rel=1e-3)
    # "79.4% of 285,336 is approximately 226K token slots"
    assert cap["peak_kv_usage_tokens"] == round(0.794 * 285336) == 226557
    assert [b["tokens_each"] for b in cap["sequence_budget"]] == [262144, 142668, 71334, 35667]
    # the 8 GiB pool (8.59 GB) over 17.18 GiB per 285,336 tokens
    assert cap["offload_pool"]["token_equivalents"] == pytest.approx(8.59e9 / (17.18 * GIB) * 285336, rel=1e-3)


def test_http_and_errors_and_time_range():
    access = 'Aug 04 10:00:{s:02d} h vllm[1]: INFO:     1.2.3.4:5 - "POST /v1/completions HTTP/1.1" {c} OK'
    lines = [access.format(s=1, c=200), access.format(s=2, c=200), access.format(s=3, c=500), access.format(s=4, c=200),
             "Aug 04 10:00:05 h vllm[1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
             "Aug 04 10:00:09 h vllm[1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    s = stats_of(lines)
    assert s["http"]["by_status"] == {200: 3, 500: 1} and s["http"]["share_200"] == 0.75
    assert s["errors"]["oom"]["count"] == 2 and "1.00 GiB" in s["errors"]["oom"]["first_message"]
    c = Clock(year=2026)
    since = c.local(8, 4, 10, 0, 3)
    s = stats_of(lines, since=since, until=since + 3)
    assert s["http"]["by_status"] == {500: 1, 200: 1} and s["errors"]["oom"]["count"] == 1


def cli(*args):
    return subprocess.run([sys.executable, "-m", "exporter", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_report_cli_markdown_json_and_html(tmp_path):
    sample = str(ROOT / "exporter" / "data" / "sample.log")
    md = cli("report", sample, "--year", "2026", "--timezone", "UTC")
    assert md.returncode == 0, md.stderr
    for heading in ("## Configuration", "## Generation throughput", "## Speculative decoding", "## KV offload",
                    "## Capacity", "## HTTP", "## Errors"):
        assert heading in md.stdout
    assert "| GPU KV capacity | 285,336 tokens |" in md.stdout
    js = cli("report", sample, "--format", "json", "--year", "2026", "--since", "2026-08-04T02:40:00+00:00",
             "--until", "2026-08-04T02:52:00+00:00", "--html", str(tmp_path / "r.html"))
    data = json.loads(js.stdout)
    assert data["errors"]["oom"]["count"] == 0  # the OOM is at 02:52:52, outside the range
    assert data["lines"]["unparsed"] == 0
    page = (tmp_path / "r.html").read_text()
    # no error in this window: no Errors chart; the five others, each in its section
    assert sections_with_charts(page) == ["Generation throughput", "Speculative decoding", "KV offload", "Capacity", "HTTP"]
    assert "<table>" in page
    bad = cli("report", sample, "--since", "yesterday-ish")
    assert bad.returncode != 0 and "--since: 'yesterday-ish' is not a time" in bad.stderr


def sections_with_charts(page: str) -> list[str]:
    """The <h2> sections that hold a chart, in page order (a chart belongs to the section it follows)."""
    import re

    out = []
    parts = re.split(r"<h2>(.*?)</h2>", page)
    for title, body in zip(parts[1::2], parts[2::2]):
        if '<figure class="chart">' in body:
            assert body.count('<figure class="chart">') == 1, title
            out.append(title)
    return out


def test_html_charts_sit_beside_their_tables_with_time_axes_units_and_marks(tmp_path):
    out = tmp_path / "r.html"
    r = cli("report", str(ROOT / "exporter" / "data" / "sample.log"), "--html", str(out), "--year", "2026",
            "--timezone", "UTC")
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert sections_with_charts(page) == ["Generation throughput", "Speculative decoding", "KV offload", "Capacity",
                                          "HTTP", "Errors"]
    throughput = page.split("<h2>Generation throughput</h2>")[1].split("<h2>")[0]
    # wall-clock ticks, a unit per axis (generation and prompt apart), the starts and the OOM marked
    assert "02:45" in throughput and "02:50" in throughput and "tok/s" in throughput
    assert ">generation<" in throughput and ">prompt<" in throughput and ">server start<" in throughput
    assert ">oom<" in throughput and ">engine dead<" in throughput
    offload = page.split("<h2>KV offload</h2>")[1].split("<h2>")[0]
    assert "GB/s" in offload and "store (GPU to host)" in offload and "load (host to GPU)" in offload
    # one self-contained file: nothing fetched, nothing run
    assert "<script" not in page and "src=" not in page and 'href="http' not in page
    assert len(page) < 400_000


def test_html_without_matplotlib_is_one_line_saying_what_to_install(tmp_path):
    shim = tmp_path / "shim" / "matplotlib"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('not installed (test shim)')\n")
    r = subprocess.run([sys.executable, "-m", "exporter", "report", str(ROOT / "exporter" / "data" / "sample.log"),
                        "--html", str(tmp_path / "r.html")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "PYTHONPATH": str(tmp_path / "shim")})
    assert r.returncode == 2 and not (tmp_path / "r.html").exists()
    # the pip of the Python that runs the exporter (a venv's, pipx's): a bare `pip` may be another's
    assert r.stderr == ("vllm-log-exporter: --html: the HTML report draws its charts with matplotlib, which this "
                        f"Python lacks: {sys.executable} -m pip install 'matplotlib>=3.7'\n")


@pytest.mark.skipif(not shutil.which("chromium"), reason="chromium (Debian package) not installed")
def test_html_report_renders_in_headless_chromium(tmp_path):
    out = tmp_path / "r.html"
    assert cli("report", str(ROOT / "exporter" / "data" / "sample.log"), "--html", str(out)).returncode == 0
    shot = tmp_path / "r.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(["chromium", *flags, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0
    assert dom.stdout.count("<svg") == 6  # every chart parsed by the browser
    r = subprocess.run(["chromium", *flags, "--window-size=1000,3000", f"--screenshot={shot}", out.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.exists() and shot.stat().st_size > 20000


def test_a_window_after_the_start_up_keeps_the_configuration_of_the_server_running_in_it():
    sample = str(ROOT / "exporter" / "data" / "sample.log")
    r = cli("report", sample, "--format", "json", "--year", "2026", "--timezone", "UTC",
            "--since", "2026-08-04T02:59:00+00:00")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    full = json.loads(cli("report", sample, "--format", "json", "--year", "2026", "--timezone", "UTC").stdout)
    # the facts of the third start (02:57), the one running at 02:59, not blanks; its starts are not counted
    assert s["config"]["version"] == full["config"]["version"] and s["config"]["gpu_kv_cache_tokens"] == 285336
    assert s["config"]["workers"] and s["config"]["workers"] == full["config"]["workers"]
    assert s["range"]["starts"] == 0 and full["range"]["starts"] == 3


def test_the_report_gives_each_oom_its_numbers_and_how_short_it_was():
    r = cli("report", str(ROOT / "exporter" / "data" / "sample.log"), "--year", "2026", "--timezone", "UTC")
    assert "| 2026-08-04 02:52:52 UTC | 0 | 2.00 GiB | 1.07 GiB | 94.97 GiB | 93.89 GiB |" in r.stdout
    assert "The last OOM asked for 2.00 GiB with 1.07 GiB free: 0.93 GiB short on GPU 0." in r.stdout
    js = json.loads(cli("report", str(ROOT / "exporter" / "data" / "sample.log"), "--format", "json").stdout)
    assert js["ooms"][0]["gpu"] == 0 and js["ooms"][0]["tried_to_allocate_bytes"] == 2 * 2**30


def test_the_report_has_lmcache_beside_the_native_offload():
    r = cli("report", str(ROOT / "exporter" / "data" / "sample-lmcache.log"), "--year", "2026", "--timezone", "UTC")
    kv = r.stdout.split("## KV offload")[1].split("## Capacity")[0]
    assert "| Stored (GPU to LMCache) |" in kv and "| Retrieved (LMCache to GPU) |" in kv
    assert "LMCache hit " in kv and "looked-up prompt tokens" in kv
    js = json.loads(cli("report", str(ROOT / "exporter" / "data" / "sample-lmcache.log"), "--format", "json").stdout)
    lm = js["kv_offload"]["lmcache"]
    assert lm["store"]["moves"] > 0 and 0 < lm["hit_ratio"] < 1 and 9 < lm["retrieve"]["gb_per_s"] < 25


def test_the_report_names_a_busy_engine_that_went_silent():
    busy = ("Aug 04 02:46:{s:02d} h vllm[1]: (APIServer pid=53) INFO 08-04 02:46:{s:02d} [loggers.py:314] Engine 000: "
            "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 300.0 tokens/s, Running: 1 reqs, "
            "Waiting: 0 reqs, GPU KV cache usage: 1.9%, Prefix cache hit rate: 88.1%")
    lines = [busy.format(s=0), busy.format(s=10), busy.format(s=55)]  # 45 s of silence after a busy window
    r = subprocess.run([sys.executable, "-m", "exporter", "report", "-", "--year", "2026", "--timezone", "UTC"],
                       cwd=ROOT, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    assert "Engine 0 stalled at 2026-08-04 02:46:10 UTC: a busy stats window, then none for 45 s" in r.stdout
    calm = [busy.format(s=0), busy.format(s=10), busy.format(s=20)]
    r = subprocess.run([sys.executable, "-m", "exporter", "report", "-", "--year", "2026"], cwd=ROOT,
                       input="\n".join(calm) + "\n", capture_output=True, text=True, timeout=60)
    assert "stalled" not in r.stdout


def test_a_garbled_gz_is_a_one_line_error_not_a_traceback(tmp_path):
    import gzip

    bad = tmp_path / "bad.log.gz"
    data = bytearray(gzip.compress(("INFO 08-04 10:00:00 [x.py:1] hello\n" * 2000).encode()))
    data[40:60] = b"\xff" * 20  # inside the deflate stream
    bad.write_bytes(bytes(data))
    r = cli("report", str(bad), "--year", "2026")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and f"{bad}: read failed:" in r.stderr


def _dp_window(engine: int, sec: int, running: int, gen: float) -> str:
    return (f"(APIServer pid=1) INFO 08-04 10:{sec // 60:02d}:{sec % 60:02d} [loggers.py:1] Engine {engine:03d}: Avg "
            f"prompt throughput: 10.0 tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, "
            f"Waiting: 0 reqs, GPU KV cache usage: {engine + 1}.0%, Prefix cache hit rate: 0.0%")


def test_data_parallel_engines_are_one_server_in_the_charts_and_one_engine_s_silence_is_no_stall():
    # engines 0 and 1 log each window in the same second; engine 1 goes quiet after a busy window while
    # engine 0 keeps logging, then comes back (vllm-ascend#10049): not a stall. Then the whole server
    # goes quiet after busy windows: that is one.
    lines = [_dp_window(0, 0, 2, 100.0), _dp_window(1, 0, 1, 50.0)]
    lines += [_dp_window(0, sec, 2, 100.0) for sec in range(10, 70, 10)]
    lines += [_dp_window(1, 70, 1, 50.0), _dp_window(0, 70, 2, 100.0)]
    lines += [_dp_window(0, 200, 2, 100.0), _dp_window(1, 200, 1, 50.0)]
    _, events = run_lines(lines)
    s = RunStats()
    for ev in events:
        s.add(ev)
    t70 = [e.ts for e in events if e.kind == "engine_stats"][9]
    assert [st["ts"] for st in s.stalls] == [t70, t70]  # both engines, silent after their windows at 70 s
    assert [st["engine"] for st in s.stalls] == [0, 1]
    # one point per moment in the charts: 150 tok/s where both engines logged, 100 where only engine 0 did
    assert list(s.gen.vs) == [150.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 150.0, 150.0]
    assert list(s.kv_usage.vs)[0] == 0.02  # the fuller engine's cache


def test_several_starts_each_show_their_own_configuration_and_none_is_mixed_into_the_last():
    """The sample's first start (with its CPU offload pool), then a start that logs only its banner and
    KV size: the last start's configuration is its own (no offload pool from the first), said to be the
    last, and the Markdown shows each start in its column with what differs marked."""
    from exporter.offline.report.markdown import config_at, render

    lines = (ROOT / "exporter" / "data" / "sample.log").read_text(encoding="utf-8").splitlines()
    # the last start's banner (version, model) and KV size, found by what they say (the sample's story grows)
    v = max(i for i, line in enumerate(lines) if "[api_utils.py:345]" in line and " version " in line)
    kv = max(i for i, line in enumerate(lines) if "GPU KV cache size" in line)
    second = [lines[i] for i in range(v, v + 3)] + [lines[kv]]
    assert "version" in "".join(second) and "KV cache size" in second[-1]
    from datetime import timezone

    _, events = run_lines(lines[:40] + second, clock=Clock(year=2026, tz=timezone.utc))
    stats = RunStats()
    for ev in events:
        stats.add(ev)
    s = stats.summary()
    c = s["config"]
    assert len(c["earlier"]) == 1 and c["earlier"][0]["offload_pool_bytes"] == 8.59e9
    assert "offload_pool_bytes" not in c and c["gpu_kv_cache_tokens"] == 285336 and c["workers"] == {}
    assert c["earlier"][0]["started"] < c["started"]
    assert config_at(s, c["started"] - 1) is c["earlier"][0] and config_at(s, c["started"]) is c
    md = render(s, tz=None)
    assert "2 starts logged a configuration, each in its column" in md
    assert "| Item | Start 1, 2026-08-04 02:43:00 UTC | Start 2, 2026-08-04 02:57:27 UTC |" in md
    assert "| ≠ CPU KV offload pool | 8,590,000,000 bytes | – |" in md
    assert "| GPU KV capacity | 285,336 tokens | 285,336 tokens |" in md


def test_one_start_keeps_one_configuration_column():
    s = stats_of((ROOT / "exporter" / "data" / "sample-v0.log").read_text(encoding="utf-8").splitlines())
    from exporter.offline.report.markdown import render

    md = render(s)
    assert s["config"]["earlier"] == [] and "| Item | Value |" in md and "starts logged" not in md
