"""`compare`: each run's figures are its own `report`'s, exactly the configuration rows that differ are
marked, the spread verdicts are right where the answer is known, bad runs fail on one line, and the
HTML page renders in a real browser."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, ROOT, SAMPLE, SAMPLE_LMCACHE, SAMPLE_V0

CAPTURES = FIXTURES / "vllm-0.32-cpu"
LOGS = [SAMPLE, SAMPLE_V0, SAMPLE_LMCACHE, CAPTURES / "traffic.log.gz", CAPTURES / "dp2.log.gz"]
TIME = ("--year", "2026", "--timezone", "UTC")


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "exporter", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, **kw)


def lookup(d, path):
    for part in path.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(part)
    return d


@pytest.fixture(scope="module")
def five():
    """The comparison of the five logs, and each log's own report."""
    r = cli("compare", *LOGS, "--format", "json", *TIME)
    assert r.returncode == 0, r.stderr
    reports = []
    for log in LOGS:
        rep = cli("report", log, "--format", "json", *TIME)
        assert rep.returncode == 0, rep.stderr
        reports.append(json.loads(rep.stdout))
    return json.loads(r.stdout), reports


def test_each_runs_figures_are_its_own_report(five):
    cmp, reports = five
    assert [r["label"] for r in cmp["runs"]] == ["sample", "sample-v0", "sample-lmcache", "traffic", "dp2"]
    for run, report in zip(cmp["runs"], reports):
        assert run["report"] == report  # the whole dict: same pass, same RunStats, same summary()
    # and every figure in the result rows is read from that dict, not computed again
    for row in cmp["results"]:
        for cell, report in zip(row["cells"], reports):
            assert cell["value"] == lookup(report, cell["path"]), (row["key"], cell["path"])
    single = next(r for r in cmp["results"] if r["key"] == "single_request_median")
    for cell, report in zip(single["cells"], reports):
        assert cell["windows"] == report["throughput"]["single_request_windows"]
        assert cell["spread"] == report["throughput"]["single_request_iqr"]
    for row in cmp["by_running"]:
        n = int(row["label"].split(": ")[1])
        for cell, report in zip(row["cells"], reports):
            mine = [b for b in report["throughput"]["by_running"] if b["running"] == n]
            assert cell["value"] == (mine[0]["median"] if mine else None)
            assert cell["windows"] == (mine[0]["windows"] if mine else 0)
    # Running: 1 is the single-request figure, counted the same way
    for report in reports:
        one = [b for b in report["throughput"]["by_running"] if b["running"] == 1]
        assert one[0]["median"] == report["throughput"]["single_request_median"]
        assert one[0]["windows"] == report["throughput"]["single_request_windows"]
    events = {r["key"]: r for r in cmp["events"]}
    for i, report in enumerate(reports):
        assert events["deaths"]["cells"][i]["value"] == report["errors"]["engine_dead"]["count"]
        assert events["stops"]["cells"][i]["value"] == report["range"]["stops"]
        assert events["http_responses"]["cells"][i]["value"] == report["http"]["responses"]
        for code, n in report["http"]["by_status"].items():
            assert events[f"http_{code}"]["cells"][i]["value"] == n


def _expected_config(report: dict) -> dict:
    """The configuration values, read from a report dict here, independently of exporter.offline.report.compare."""
    c, s = report["config"], report["config"].get("settings", {})
    version = c.get("version")
    model = c.get("model") or ""
    snap = re.search(r"snapshots/([0-9a-f]+)", model)
    kv = report["kv_offload"]
    native = bool(c.get("offload_pool_bytes") or kv.get("store") or kv.get("load"))
    backend = " + ".join([x for x, on in (("vLLM native CPU offload", native), ("LMCache", bool(kv.get("lmcache"))))
                          if on]) or "none"
    sd = report["spec_decode"]
    depth = (", ".join(map(str, sd["depths"])) if sd["depths"]
             else str(s["num_speculative_tokens"]) if "num_speculative_tokens" in s
             else ("on (depth not logged)" if sd["windows"] else "off"))
    out = {
        "version": version.split("+")[0] if version else None,
        "build": (version.partition("+")[2] or "release") if version else None,
        "model": c.get("model"), "snapshot": snap.group(1) if snap else None,
        "max_model_len": c.get("max_model_len") or c.get("max_seq_len"),
        "speculative_depth": depth, "offload_backend": backend,
        "speculative_method": s.get("speculative_method") or ("off" if not sd["windows"] else None),
        "offload_pool_bytes": c.get("offload_pool_bytes") or (0 if backend == "none" else None),
    }
    for k in ("quantization", "tensor_parallel_size", "max_num_seqs", "kv_cache_dtype", "kv_cache_device",
              "gpu_kv_cache_tokens", "gpu_blocks", "max_concurrency", "init_seconds", "compile_seconds"):
        out[k] = c.get(k)
    for k in ("served_model_name", "dtype", "data_parallel_size", "pipeline_parallel_size",
              "decode_context_parallel_size", "max_num_batched_tokens", "gpu_memory_utilization",
              "enable_prefix_caching", "enforce_eager"):
        out[k] = s.get(k)
    for w, fields in c["workers"].items():
        for f, v in fields.items():
            if f in ("weights_bytes", "kv_cache_bytes", "peak_activation_bytes", "non_torch_bytes",
                     "cuda_graph_bytes", "load_seconds"):
                out[f"workers.{w}.{f}"] = v
    return out


def test_exactly_the_configuration_rows_that_differ_are_marked(five):
    cmp, reports = five
    expected = [_expected_config(r) for r in reports]
    keys = set().union(*expected)
    differs = {k for k in keys if len({repr(e.get(k)) for e in expected if e.get(k) is not None}) > 1}
    rows = {r["key"]: r for r in cmp["config"]}
    assert keys <= set(rows)
    assert {k for k, r in rows.items() if r["status"] == "differs"} == differs
    for k in keys:
        assert rows[k]["values"] == [e.get(k) for e in expected], k
    # the Markdown marks the same rows, and only them
    md = cli("compare", *LOGS, *TIME).stdout
    config = md.split("## Configuration")[1].split("## Throughput")[0]
    marked = {line.split(" | ")[1] for line in config.splitlines() if line.startswith("| ≠ |")}
    assert marked == {rows[k]["label"] for k in differs}


def test_a_pair_checked_by_hand_the_two_real_captures():
    # traffic.log.gz and dp2.log.gz: the same vLLM 0.32 on CPU, the same tiny model built in a different
    # temporary directory; traffic ran ngram speculative decoding ('speculative_config': {'method': 'ngram',
    # 'num_speculative_tokens': 4} in its non-default args), dp2 ran 'data_parallel_size': 2 and no drafts;
    # engine init took 18.11 s and 26.53 s. Nothing else in the two logs' start-ups differs.
    r = cli("compare", CAPTURES / "traffic.log.gz", CAPTURES / "dp2.log.gz", "--format", "json", *TIME)
    rows = {row["key"]: row for row in json.loads(r.stdout)["config"]}
    assert {k for k, row in rows.items() if row["status"] == "differs"} == {
        "model", "data_parallel_size", "speculative_method", "speculative_depth", "init_seconds"}
    assert rows["speculative_method"]["values"] == ["ngram", "off"]
    assert rows["data_parallel_size"]["values"] == [1, 2]
    assert rows["init_seconds"]["values"] == [18.11, 26.53]
    assert rows["tensor_parallel_size"]["status"] == rows["gpu_kv_cache_tokens"]["status"] == "same"


def _stats(sec: int, gen: float, running: int) -> str:
    return (f"INFO 08-04 10:{sec // 60:02d}:{sec % 60:02d} [loggers.py:1] Engine 000: Avg prompt throughput: 0.0 "
            f"tokens/s, Avg generation throughput: {gen} tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
            f"GPU KV cache usage: 10.0%, Prefix cache hit rate: 50.0%")


def _log(tmp_path, name, ones, twos=()):
    lines = [_stats(10 * i, g, 1) for i, g in enumerate(ones)]
    lines += [_stats(10 * (len(ones) + i), g, 2) for i, g in enumerate(twos)]
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_spread_verdicts_where_the_answer_is_known(tmp_path):
    # Tukey hinges of 5 values: the 2nd and the 4th.
    base = _log(tmp_path, "base.log", [100, 110, 120, 130, 140], [300, 310, 320, 330, 340])  # IQR 110-130, 310-330
    near = _log(tmp_path, "near.log", [120, 130, 140, 150, 160], [200, 210, 220, 230, 240])  # 130-150 touches 130; 210-230
    far = _log(tmp_path, "far.log", [200, 210, 220, 230, 240], [320, 325, 330, 335, 340])    # 210-230; 325-335
    few = _log(tmp_path, "few.log", [500, 510, 520])  # 3 windows: hinges 505 and 515
    r = cli("compare", base, near, far, few, "--format", "json", *TIME)
    assert r.returncode == 0, r.stderr
    cmp = json.loads(r.stdout)
    single = next(x for x in cmp["results"] if x["key"] == "single_request_median")
    assert [c["value"] for c in single["cells"]] == [120, 140, 220, 510]
    assert [c["spread"] for c in single["cells"]] == [[110, 130], [130, 150], [210, 230], [505, 515]]
    assert single["verdicts"] == ["inside spread", "outside spread", "too few windows"]
    assert [d["abs"] for d in single["diffs"]] == [20, 100, 390]
    by = {x["label"]: x for x in cmp["by_running"]}
    assert by["Running: 1"]["verdicts"] == single["verdicts"]
    assert [c["value"] for c in by["Running: 2"]["cells"]] == [320, 220, 330, None]
    assert by["Running: 2"]["verdicts"] == ["outside spread", "inside spread", None]
    assert [c["windows"] for c in by["Running: 2"]["cells"]] == [5, 5, 5, 0]
    md = cli("compare", base, far, *TIME).stdout
    assert "| Running: 1 | 120.0 tok/s (110.0-130.0) | 220.0 tok/s (210.0-230.0) | +100.0 (+83.3%) | 5 / 5 | outside spread |" in md
    assert "| Running: 2 | 320.0 tok/s (310.0-330.0) | 330.0 tok/s (325.0-335.0) | +10.0 (+3.1%) | 5 / 5 | inside spread |" in md


def test_a_range_per_run_is_the_reports_range():
    since, until = "2026-08-04T02:40:00+00:00", "2026-08-04T02:52:00+00:00"
    r = cli("compare", f"first={SAMPLE}@{since}..{until}", f"rest={SAMPLE}@{until}..", "--format", "json", *TIME)
    assert r.returncode == 0, r.stderr
    cmp = json.loads(r.stdout)
    assert [x["label"] for x in cmp["runs"]] == ["first", "rest"]
    first = json.loads(cli("report", SAMPLE, "--since", since, "--until", until, "--format", "json", *TIME).stdout)
    rest = json.loads(cli("report", SAMPLE, "--since", until, "--format", "json", *TIME).stdout)
    assert cmp["runs"][0]["report"] == first and cmp["runs"][1]["report"] == rest
    # --since/--until apply to every run without its own range
    both = json.loads(cli("compare", SAMPLE, f"again={SAMPLE}", "--since", until, "--format", "json", *TIME).stdout)
    assert both["runs"][0]["report"] == both["runs"][1]["report"] == rest
    assert [x["label"] for x in both["runs"]] == ["sample", "again"]
    # the same name twice gets told apart; a range with nothing of the run in it is an error, not a blank column
    twice = json.loads(cli("compare", SAMPLE, SAMPLE, "--format", "json", *TIME).stdout)
    assert [x["label"] for x in twice["runs"]] == ["sample (1)", "sample (2)"]
    empty = cli("compare", SAMPLE, SAMPLE_V0, "--since", until, *TIME)
    assert empty.returncode == 2 and empty.stderr == (
        f"vllm-log-exporter: compare: {SAMPLE_V0}: no vLLM log lines in the time range 2026-08-04T02:52:00+00:00 .. …\n")


@pytest.mark.parametrize("make, says", [
    (lambda d: d / "missing.log", "missing.log: cannot open: No such file or directory"),
    (lambda d: d, "cannot open: Is a directory"),
    (lambda d: (d / "bad.log.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" * 10) and d / "bad.log.gz", "bad.log.gz: read failed: Error -3 while decompressing"),
    (lambda d: (d / "notes.txt").write_text("shopping list\nmilk\n") and d / "notes.txt", "notes.txt: no vLLM log lines"),
])
def test_a_bad_run_is_one_line_naming_it(tmp_path, make, says):
    bad = make(tmp_path)
    r = cli("compare", SAMPLE, bad, *TIME)
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("vllm-log-exporter: compare: "), r.stderr
    assert says in r.stderr and str(bad) in r.stderr


def test_one_run_or_a_bad_range_is_refused():
    assert cli("compare", SAMPLE).returncode != 0
    r = cli("compare", SAMPLE, f"{SAMPLE}@yesterday")
    assert r.returncode == 2 and "a range is SINCE..UNTIL" in r.stderr
    r = cli("compare", SAMPLE, f"{SAMPLE}@soon..later")
    assert r.returncode == 2 and "'soon' is not a time" in r.stderr and r.stderr.count("\n") == 1


def sections_with_charts(page: str) -> dict[str, int]:
    parts = re.split(r"<h2>(.*?)</h2>", page)
    return {t: b.count('<figure class="chart">') for t, b in zip(parts[1::2], parts[2::2]) if '<figure' in b}


def test_html_overlays_the_runs_and_renders_in_headless_chromium(tmp_path):
    out = tmp_path / "cmp.html"
    r = cli("compare", SAMPLE, SAMPLE_V0, SAMPLE_LMCACHE, CAPTURES / "traffic.log.gz", CAPTURES / "dp2.log.gz",
            "--html", out, *TIME)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    page = out.read_text()
    assert sections_with_charts(page) == {
        "Throughput": 1, "Like with like: generation throughput at the same number of running requests": 1,
        "Speculative decoding": 1, "KV offload": 1, "HTTP, errors, deaths and stops": 2}
    throughput = page.split("<h2>Throughput</h2>")[1].split("<h2>")[0]
    for label in ("sample", "sample-v0", "sample-lmcache", "traffic", "dp2"):
        assert f">{label}<" in throughput  # every run in the legend
    for colour in ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"):
        assert colour in throughput  # one colour per run
    assert "minutes since the run" in throughput and "tok/s" in throughput
    assert "<script" not in page and "src=" not in page and 'href="http' not in page
    if not shutil.which("chromium"):
        pytest.skip("chromium (Debian package) not installed")
    shot = tmp_path / "cmp.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(["chromium", *flags, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and dom.stdout.count("<svg") == 6
    r = subprocess.run(["chromium", *flags, "--window-size=1400,3000", f"--screenshot={shot}", out.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.exists() and shot.stat().st_size > 50_000
