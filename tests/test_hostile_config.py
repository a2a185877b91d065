"""What the exporter is given, hostile too (issue 43 items 10-13): a deeply nested state file stopped the
daemon at start (RecursionError, where README says an unreadable state file is reported and ignored); a
YAML key that is a list was a TypeError traceback at start and an asyncio traceback at SIGHUP; two rules
declaring counter X_total and histogram X gave OpenMetrics the family twice; basic auth told which
user names exist by how long a refusal took."""

import asyncio
import subprocess
import sys

import pytest
import structlog
import yaml

from exporter.config.rules import load_rules
from exporter.config.settings import Config, ConfigError
from tests.conftest import ROOT


def test_a_state_file_nested_100000_deep_is_reported_and_ignored(tmp_path):
    from exporter.sources import state

    path = tmp_path / "state.json"
    path.write_text('{"version": 2, "sources": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with structlog.testing.capture_logs() as logged:
        assert state.load(str(path)) == {}
    assert [e["event"] for e in logged] == ["state file unreadable, ignored"]


LIST_KEY = "? [a, b]\n: 1\nsources:\n  - {name: v, type: demo}\n"


def test_a_config_key_that_is_a_list_is_one_line_at_start(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(LIST_KEY)
    r = subprocess.run([sys.executable, "-m", "exporter", "--config", str(cfg)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert f"{cfg}:1: invalid YAML: a key that is a list" in r.stderr


def test_a_config_key_that_is_a_list_at_sighup_is_refused_and_the_rules_stay(tmp_path):
    from exporter.config.file import from_mapping, load_file
    from exporter.daemon.daemon import Daemon

    cfg = tmp_path / "c.yaml"
    rules = {"rules": [{"name": "loaded", "pattern": r"(?P<name>\w+) loaded",
                        "metrics": [{"name": "t_loaded_total", "type": "counter"}]}]}
    cfg.write_text(yaml.safe_dump({**rules, "sources": [{"name": "v", "type": "demo"}]}))
    first = from_mapping(load_file(str(cfg)), str(cfg))
    daemon = Daemon(first, reload=lambda: (from_mapping(load_file(str(cfg)), str(cfg)), None))
    cfg.write_text(LIST_KEY)
    with structlog.testing.capture_logs() as logged:
        daemon.reload()
    (refused,) = [e for e in logged if e["event"] == "reload refused; running on as before"]
    assert "a key that is a list" in refused["error"]
    assert [r.name for r in daemon.cfg.rules] == ["loaded"]


def test_a_reload_that_raises_anything_is_refused_in_one_line(tmp_path):
    from exporter.daemon.daemon import Daemon

    def broken():
        raise TypeError("unhashable type: 'list'")

    daemon = Daemon(Config(sources=[]), reload=broken)
    with structlog.testing.capture_logs() as logged:
        daemon.reload()  # (raised into asyncio's signal handler: a traceback)
    assert [e["event"] for e in logged] == ["reload refused; running on as before"]


def _metric_rule(name, metric_name, mtype, pattern):
    m = {"name": metric_name, "type": mtype}
    if mtype == "histogram":
        m["value"] = "v"
    return {"name": name, "pattern": pattern, "fields": {"v": "float"} if mtype == "histogram" else {},
            "metrics": [m]}


@pytest.mark.parametrize("one_rule", [False, True])
def test_a_counter_x_total_and_a_histogram_x_are_refused_as_one_family(one_rule):
    counter = _metric_rule("a", "t_x_total", "counter", r"alpha (?P<v>\d+) done")
    hist = _metric_rule("b", "t_x", "histogram", r"beta (?P<v>\d+) done")
    if one_rule:
        counter["metrics"] += hist["metrics"]
        counter["fields"] = {"v": "float"}
        rules = [counter]
    else:
        rules = [counter, hist]
    with pytest.raises(ConfigError) as e:
        load_rules(rules, "c.yaml: rules")
    assert "'t_x' (histogram)" in str(e.value) and "one metric family ('t_x')" in str(e.value)
    assert "\n" not in str(e.value)


async def test_an_unknown_user_costs_a_password_check_as_a_known_one_does(monkeypatch):
    import bcrypt

    from exporter.web.webconfig import Auth

    known = bcrypt.hashpw(b"secret", bcrypt.gensalt(rounds=5))
    checked: list[bytes] = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda pw, h: (checked.append(h), real(pw, h))[1])
    auth = Auth({"prometheus": known})
    assert not await auth.check("prometheus", b"wrong")
    assert not await auth.check("nobody", b"wrong")
    assert len(checked) == 2 and checked[1] != known and checked[1][:7] == known[:7]  # same algorithm and cost
    assert await auth.check("prometheus", b"secret")
