"""Signals to the real exporter: each one that would end a process ends it with the state saved, and
SIGHUP reloads what can change while running."""

import json
import signal
import time

import bcrypt
import pytest

from tests.helpers import Exporter, ceiling, wait_until
from tests.test_hardening import total, write


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2])
def test_a_terminating_signal_saves_the_state_so_no_line_is_counted_twice(tmp_path, sig):
    log = tmp_path / "gp.log"
    log.write_text("")
    state = tmp_path / "state.json"
    args = ("--source", f"gp={log}", "--state-file", str(state))
    ex = Exporter(*args).start()
    n = write(log, 0, 400)
    wait_until(lambda: total(ex) == 400, 20, what="400 lines")
    ex.proc.send_signal(sig)
    assert ex.proc.wait(15) == 0  # a clean exit, not death by the signal
    err = ex.proc.stderr.read()
    assert f'"signal": "{sig.name}"' in err, err
    saved = json.loads(state.read_text())["sources"]["gp"]["checkpoint"]
    assert saved["offset"] == log.stat().st_size
    n = write(log, n, 60)
    with Exporter(*args) as again:
        wait_until(lambda: total(again) == 60, 20, what="the 60 new lines")
        time.sleep(1.0)  # and nothing more: none of the first 400 read again
        assert total(again) == 60
    assert n == 460


def _auth_get(ex, user_password=None):
    import base64
    import urllib.error
    import urllib.request

    req = urllib.request.Request(ex.url + "/metrics")
    if user_password:
        req.add_header("Authorization", "Basic " + base64.b64encode(user_password.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=ceiling(5)) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _hash(password: bytes) -> str:
    return bcrypt.hashpw(password, bcrypt.gensalt(rounds=4)).decode()


def _events(err: str) -> list[dict]:
    return [json.loads(x) for x in err.splitlines() if x.startswith("{")]


def test_sighup_reloads_users_and_log_level_refuses_a_bad_config_and_names_what_needs_a_restart(tmp_path):
    log = tmp_path / "gp.log"
    log.write_text("")
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{_hash(b'old')}'\n")
    cfg = tmp_path / "config.yaml"
    body = f"web: {{config_file: {web}}}\nsources: [{{name: gp, type: file, path: {log}}}]\n"
    cfg.write_text("log: {level: info}\n" + body)
    ex = Exporter("--config", str(cfg))
    import subprocess
    import sys

    from tests.helpers import ROOT

    ex.proc = subprocess.Popen([sys.executable, "-m", "exporter", "serve", *ex.args], cwd=ROOT, env=ex.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: ex.proc.poll() is None and _auth_get(ex, "prometheus:old") == 200, 20, what="exporter up")
        n = write(log, 0, 50)

        # 1. a new password and a debug log level: applied without a restart, lines keep counting
        web.write_text(f"basic_auth_users:\n  prometheus: '{_hash(b'new')}'\n  grafana: '{_hash(b'g')}'\n")
        cfg.write_text("log: {level: debug}\n" + body)
        ex.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: _auth_get(ex, "prometheus:new") == 200, 10, what="the new password accepted")
        assert _auth_get(ex, "prometheus:old") == 401  # the cached success of the old one is gone
        assert _auth_get(ex, "grafana:g") == 200
        n = write(log, n, 50)

        # 2. a config that does not load: refused, everything as before
        cfg.write_text("log: {level: loud}\n" + body)
        ex.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert ex.proc.poll() is None and _auth_get(ex, "prometheus:new") == 200

        # 3. a changed source: named as needing a restart, not half-applied
        cfg.write_text("log: {level: debug}\n" + body.replace("name: gp", "name: gp2"))
        ex.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert ex.proc.poll() is None
        n = write(log, n, 25)
        import base64
        import urllib.request

        req = urllib.request.Request(ex.url + "/metrics", headers={
            "Authorization": "Basic " + base64.b64encode(b"prometheus:new").decode()})

        def counted():
            from tests.helpers import samples, value

            with urllib.request.urlopen(req, timeout=ceiling(5)) as r:
                s = samples(r.read().decode())
            return sum(value(s, "vllm_log_exporter_lines_total", server="gp", result=k) or 0
                       for k in ("parsed", "ignored", "unparsed"))

        wait_until(lambda: counted() == n == 125, 20, what="all 125 lines under the old source name")
    finally:
        ex.proc.send_signal(signal.SIGTERM)
        ex.proc.wait(15)
    events = _events(ex.proc.stderr.read())
    reloaded = [e for e in events if e["event"] == "reloaded (SIGHUP)"]
    assert len(reloaded) == 2 and reloaded[0]["applied"] == ["log", "basic_auth_users"], reloaded
    refused = [e for e in events if e["event"] == "reload refused; running on as before"]
    assert len(refused) == 1 and "log.level: 'loud' is not one of" in refused[0]["error"]
    restart = [e for e in events if e["event"] == "changed settings need a restart to apply"]
    assert len(restart) == 1 and restart[0]["settings"] == ["sources"]
