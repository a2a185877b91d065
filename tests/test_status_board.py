"""The Service status board's status and reasons (mixin/status_board.py), evaluated by the real promtool
on series of six servers, one in each state the board tells apart. The board's other checks (schema,
lint, every query with data on the demo and on a real vLLM) are tests/test_mixin.py, test_stack_e2e.py
and test_slo_live.py's."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from mixin import status_board
from tests.helpers import grafana_substitute, have

E = 'job="vllm-log-exporter", instance="h:10825"'
SERIES = [
    # serving; sleeping (serving, its engine asleep); starting
    (f'vllm_log_server_state{{{E}, server="up", state="serving"}}', "1x10"),
    (f'vllm_log_server_state{{{E}, server="zzz", state="serving"}}', "1x10"),
    ('vllm:engine_sleep_state{job="vllm", server="zzz", engine="0", sleep_state="awake"}', "0x10"),
    ('vllm:engine_sleep_state{job="vllm", server="up", engine="0", sleep_state="awake"}', "1x10"),
    (f'vllm_log_server_state{{{E}, server="boot", state="starting"}}', "1x10"),
    # failed to start: twice for want of KV cache, once a bad argument
    (f'vllm_log_server_state{{{E}, server="nofit", state="failed"}}', "1x10"),
    (f'vllm_log_startup_failures_total{{{E}, server="nofit", reason="kv_cache_too_small"}}', "0 0 1 1 2x7"),
    (f'vllm_log_startup_failures_total{{{E}, server="nofit", reason="bad_argument"}}', "0 1x9"),
    # dead: an OOM, then later its engine's death
    (f'vllm_log_server_state{{{E}, server="oom", state="dead"}}', "1x10"),
    (f'vllm_log_last_error_timestamp_seconds{{{E}, server="oom", kind="oom"}}', "1000x10"),
    (f'vllm_log_last_error_timestamp_seconds{{{E}, server="oom", kind="engine_dead"}}', "900x10"),
    # stopped on purpose
    (f'vllm_log_server_state{{{E}, server="off", state="stopped"}}', "1x10"),
]


def _eval(tmp_path, expr: str) -> dict[str, tuple[str, float]]:
    """server -> (why, value) of ``expr`` at 9m, by promtool (a test that fails prints what it got)."""
    test = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": [{"series": s, "values": v} for s, v in SERIES],
        "promql_expr_test": [{"expr": grafana_substitute(expr).replace("[1h]", "[9m]"), "eval_time": "9m",
                              "exp_samples": []}]}]}
    path = tmp_path / "t.yml"
    path.write_text(yaml.safe_dump(test))
    r = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    got_line = next((line for line in (r.stdout + r.stderr).splitlines() if line.strip().startswith("got:")), "")
    # promtool prints what it got: {server="up", why="serving"} 1E+00, ...
    return {server: (why, float(value)) for server, why, value in
            re.findall(r'\{server="([^"]*)"(?:, why="([^"]*)")?\} ([-+.\dE]+)', got_line)}


@pytest.mark.skipif(not have("promtool"), reason="promtool (Debian package prometheus) not installed")
def test_each_server_gets_its_status_and_the_logs_reason_in_plain_words(tmp_path):
    words = _eval(tmp_path, status_board.reasons())
    assert words == {
        "up": ("serving", 1), "zzz": ("asleep: requests wait until it is woken", 3), "boot": ("starting up", 2),
        "nofit": (status_board.FAILED_WORDS["kv_cache_too_small"], 5),
        "oom": (status_board.DEAD_WORDS["oom"], 4),
        "off": ("stopped on purpose (an update or a restart)", 4)}, words
    numbers = {server: value for server, (_, value) in _eval(tmp_path, status_board.status()).items()}
    # (the status alone carries no reason)
    assert numbers == {"up": 1, "zzz": 3, "boot": 2, "nofit": 5, "oom": 4, "off": 4}
    assert {n: w for n, (w, _) in status_board.STATUSES.items()} == {
        1: "Online", 2: "Starting", 3: "Sleeping", 4: "Down", 5: "Failed to start"}
