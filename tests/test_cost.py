"""Cost per token: the config's cost section (exporter.config.cost) becomes the exporter's price series
(exporter.metrics.cost), which the rules divide by the tokens served (mixin/cost.py, tested by promtool in
deploy/prometheus/rules/vllm-log-exporter-cost.rules_test.yml); ``report --price-per-hour`` gives the run's
cost and its price per million tokens, and ``compare`` holds two runs' against each other."""

from __future__ import annotations

import json

import pytest

from exporter.config.file import from_mapping
from exporter.config.settings import ConfigError
from exporter.metrics import Metrics
from tests.conftest import SAMPLE, SAMPLE_LMCACHE
from tests.helpers import ROOT, samples, value


def _prices(section: dict) -> dict:
    return from_mapping({"cost": section}, "c.yaml").cost


def test_a_flat_rate_a_gpu_hour_price_and_per_server_entries_resolve_to_prices_per_hour():
    cost = _prices({"gpu_hour": 2.0, "gpus": 2, "per_kwh": 0.15,
                    "servers": {"big": {"gpus": 8}, "flat": {"per_hour": 1.5}, "own": {"gpu_hour": 3, "gpus": 1}}})
    assert cost["default"] == (4.0, 0.15)
    assert cost["servers"] == {"big": (16.0, 0.15), "flat": (1.5, 0.15), "own": (3.0, 0.15)}
    # the section may give half a GPU-hour price, the servers the rest: no default rate then
    half = _prices({"gpu_hour": 2.5, "servers": {"a": {"gpus": 4}}})
    assert half["default"] == (None, None) and half["servers"]["a"] == (10.0, None)


@pytest.mark.parametrize("section, words", [
    ({"per_hour": -1}, "a number of 0 or more"),
    ({"per_hour": float("nan")}, "a number of 0 or more"),
    ({"per_hour": True}, "a number of 0 or more"),
    ({"per_hour": 1, "gpus": 2}, "not both"),
    ({"servers": {"x": {"gpu_hour": 1}}}, "go together"),
    ({"per_hur": 1}, "cost.per_hur: unknown key"),
    ({"servers": {"x": {"servers": {}}}}, "cost.servers.x.servers: unknown key"),
    ({"servers": ["x"]}, "cost.servers: expected a mapping"),
])
def test_a_wrong_cost_section_is_a_one_line_error_naming_the_key(section, words):
    with pytest.raises(ConfigError) as e:
        _prices(section)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_the_prices_are_series_of_each_server_kept_across_its_restarts_and_replaced_on_a_reload():
    m = Metrics(process_metrics=False)
    m.set_costs(_prices({"per_hour": 4.0, "per_kwh": 0.2, "servers": {"big": {"per_hour": 16}}}))
    for server in ("a", "big"):
        m.add_server(server)
    s = samples(m.render().decode())
    assert value(s, "vllm_log_cost_per_hour", server="a") == 4.0
    assert value(s, "vllm_log_cost_per_hour", server="big") == 16.0
    assert value(s, "vllm_log_energy_price_per_kwh", server="big") == 0.2
    m.reset_server("a")  # a new start of the server: what it costs has not changed
    assert value(samples(m.render().decode()), "vllm_log_cost_per_hour", server="a") == 4.0
    m.set_costs(_prices({"servers": {"big": {"per_hour": 12}}}))  # a reload: a has no price any more
    s = samples(m.render().decode())
    assert value(s, "vllm_log_cost_per_hour", server="a") is None
    assert value(s, "vllm_log_energy_price_per_kwh", server="big") is None
    assert value(s, "vllm_log_cost_per_hour", server="big") == 12.0


def test_without_a_cost_section_no_price_series_exists():
    m = Metrics(process_metrics=False)
    m.add_server("a")
    assert value(samples(m.render().decode()), "vllm_log_cost_per_hour", server="a") is None


def _report(*args: str) -> dict:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "exporter", "report", str(SAMPLE), "--format", "json", *args],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_report_prices_the_run_with_the_tokens_the_exporter_counts():
    plain, priced = _report(), _report("--price-per-hour", "4.5")
    assert "cost" not in plain  # a report without a price is unchanged
    assert {k: v for k, v in priced.items() if k != "cost"} == plain
    c = priced["cost"]
    # the exporter's own vllm_log_generation_tokens_total and computed prompt tokens after the same log
    golden = samples((ROOT / "tests" / "golden" / "exporter-data" / "sample.prom").read_text())
    assert c["generated_tokens"] == pytest.approx(value(golden, "vllm_log_generation_tokens_total", server="sample", engine="0"))
    assert c["prompt_tokens"] == pytest.approx(value(golden, "vllm_log_computed_prompt_tokens_total", server="sample", engine="0"))
    hours = (plain["range"]["last"] - plain["range"]["first"]) / 3600
    assert c["cost"] == pytest.approx(4.5 * hours)
    assert c["per_million_generated"] == pytest.approx(4.5 * hours / c["generated_tokens"] * 1e6)
    # a busy window at the median throughput of the busy windows: the hour's price over the hour's tokens
    lo, hi = c["busy_per_million_generated_iqr"]
    assert lo < c["busy_per_million_generated"] < hi
    assert c["busy_windows"] == plain["throughput"]["nonzero_windows"]


def test_report_refuses_a_price_that_is_no_price():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "exporter", "report", str(SAMPLE), "--price-per-hour", "-2"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "a price is a number of 0 or more" in r.stderr


def test_compare_puts_two_runs_price_per_token_side_by_side_with_the_verdict():
    from exporter.framing.clock import Clock
    from exporter.offline.report import compare as cmp

    from exporter.commands.compare import load

    clock = Clock(year=2026)
    a = load(str(SAMPLE), clock, None, None, price_per_hour=4.0)[1]
    cheaper = load(str(SAMPLE), clock, None, None, price_per_hour=3.0)[1]
    result = cmp.compare([{"label": "a", "source": "a", "report": a}, {"label": "b", "source": "b", "report": cheaper}])
    row = next(r for r in result["results"] if r["key"] == "cost_busy_per_million_generated")
    assert row["diffs"][0]["rel"] == pytest.approx(-0.25)
    # the same windows at three quarters of the price: spreads of 4.19-5.05 and 3.14-3.79 do not overlap
    assert row["verdicts"] == ["outside spread"]
    md = cmp.render_markdown(result)
    assert "- b costs 25 % less per generated token than a while busy, outside the spread (a change)." in md
    # LMCache's sample: four busy windows, too few to tell
    lm = load(str(SAMPLE_LMCACHE), clock, None, None, price_per_hour=4.0)[1]
    result = cmp.compare([{"label": "a", "source": "a", "report": a}, {"label": "lm", "source": "lm", "report": lm}])
    assert "too few windows to tell" in cmp.render_markdown(result)
    # without prices: no Cost section
    plain = cmp.compare([{"label": "a", "source": "a", "report": load(str(SAMPLE), clock, None, None)[1]},
                         {"label": "b", "source": "b", "report": load(str(SAMPLE), clock, None, None)[1]}])
    assert "## Cost" not in cmp.render_markdown(plain)


def test_the_real_daemon_serves_the_prices_and_takes_a_changed_section_on_sighup(tmp_path):
    import signal

    import yaml

    from tests.helpers import Exporter, wait_until

    log = tmp_path / "vllm.log"
    log.write_text("")
    cfg = tmp_path / "config.yaml"
    sources = [{"name": "big", "type": "file", "path": str(log)}]
    cfg.write_text(yaml.safe_dump({"sources": sources, "cost": {"gpu_hour": 2.5, "gpus": 8}}))
    ex = Exporter("--config", str(cfg)).start()
    try:
        wait_until(lambda: ex.value("vllm_log_cost_per_hour", server="big") == 20.0, what="the configured price")
        assert ex.value("vllm_log_energy_price_per_kwh", server="big") is None
        cfg.write_text(yaml.safe_dump({"sources": sources, "cost": {"per_hour": 12, "per_kwh": 0.3}}))
        ex.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: ex.value("vllm_log_cost_per_hour", server="big") == 12.0, what="the new price")
        assert ex.value("vllm_log_energy_price_per_kwh", server="big") == 0.3
    finally:
        ex.stop()
