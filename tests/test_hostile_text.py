"""Text is text, whatever bytes it came in (exporter.framing.text): a lone surrogate, a NUL hole, a
byte order mark and CR-only line ends each have one treatment, in the daemon and in every offline
command, and none of them takes /metrics down or ends a command with a traceback."""

import gzip
import json
import subprocess
import sys

import pytest
import yaml

from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.stream.pipeline import Pipeline
from tests.conftest import FIXTURES, ROOT
from tests.helpers import Exporter, http_get, samples, wait_until
from tests.hostile import OOM_LINE, json_record

GOOD = (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines()
# Python's JSON formatter writes a client's lone surrogate as this escape; a version record was enough
SURROGATE_VERSION = json_record("vLLM API server version 0.32.0\ud800", levelname="INFO",
                                name="vllm.entrypoints.openai.api_server")
SURROGATE_OOM = json_record("torch.OutOfMemoryError: CUDA out of memory.\udcff Tried to allocate 2.00 GiB.")


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "exporter", *args, "--year", "2026", "--timezone", "UTC"],
                          cwd=ROOT, capture_output=True, timeout=120, input=stdin)


def test_the_escape_reaches_no_str_past_framing():
    assert "\\ud800" in SURROGATE_VERSION
    p = Pipeline(Clock(year=2026))
    events = p.feed(SURROGATE_VERSION)[1] + p.feed(SURROGATE_OOM)[1] + p.flush()
    versions = [ev.fields["version"] for ev in events if ev.kind == "version"]
    assert versions == ["0.32.0\ufffd"]
    assert "oom" in {ev.kind for ev in events}
    for ev in events:
        json.dumps(ev.to_dict(), ensure_ascii=False).encode("utf-8")  # no surrogate anywhere


def test_metrics_render_in_both_formats_after_a_surrogate_record():
    m = Metrics(process_metrics=False)
    p = Pipeline(Clock(year=2026))
    m.observe_many("s", p.feed(SURROGATE_VERSION)[1])
    text = m.render().decode("utf-8")
    assert 'version="0.32.0\ufffd"' in text
    om = m.render_openmetrics().decode("utf-8")
    assert 'version="0.32.0\ufffd"' in om


def test_the_daemon_serves_metrics_after_a_surrogate_record(tmp_path):
    log = tmp_path / "v.log"
    log.write_text("\n".join(GOOD[:5] + [SURROGATE_VERSION] + GOOD[5:20]) + "\n")
    with Exporter("--source", f"v={log}", "--from-start") as ex:
        wait_until(lambda: ex.value("vllm_log_exporter_lines_total", server="v") == 21, 20, what="21 lines")
        status, body = http_get(ex.url + "/metrics")
        assert status == 200 and 'version="0.32.0\ufffd"' in body
        import urllib.request

        req = urllib.request.Request(ex.url + "/metrics", headers={"Accept": "application/openmetrics-text"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200 and "# EOF" in r.read().decode("utf-8")


RULES = {"rules": [{"name": "versions", "pattern": r"version (?P<v>\S+)", "logger": "api_server.py",
                    "metrics": [{"name": "t_versions_total", "type": "counter", "labels": {"v": {"max_values": 4}}}]}]}


@pytest.mark.parametrize("record", ["version", "oom"])
def test_every_offline_command_reads_a_surrogate_record(tmp_path, record):
    bad = SURROGATE_VERSION if record == "version" else SURROGATE_OOM
    clean, dirty = tmp_path / "clean.log", tmp_path / "dirty.log"
    clean.write_text("\n".join(GOOD) + "\n")
    dirty.write_text("\n".join(GOOD[:16] + [bad] + GOOD[16:]) + "\n")
    rules = tmp_path / "r.yaml"
    rules.write_text(yaml.safe_dump(RULES))
    for cmd in (("parse", str(dirty)), ("parse", "--stats", str(dirty)), ("parse", "--explain", str(dirty)),
                ("report", str(dirty)), ("report", str(dirty), "--format", "json"),
                ("report", str(dirty), "--html", str(tmp_path / "r.html")),
                ("compare", str(dirty), str(clean)), ("compare", str(dirty), str(clean), "--format", "json"),
                ("backfill", str(dirty), "-o", str(tmp_path / "out.om")),
                ("test", "--rules", str(rules), str(dirty))):
        r = cli(*cmd)
        err = r.stderr.decode("utf-8", "replace")
        assert r.returncode == 0 and "Traceback" not in err, (cmd, err[-2000:])
        r.stdout.decode("utf-8")  # what it printed is UTF-8
    assert "\ufffd" in (tmp_path / "out.om").read_text(encoding="utf-8") or record == "oom"


def test_a_byte_order_mark_does_not_hide_the_banner(tmp_path):
    """An editor's BOM in front of the first line (vLLM's banner) and in front of a later one."""
    log, plain = tmp_path / "bom.log", tmp_path / "plain.log"
    text = "\n".join(GOOD) + "\n"
    plain.write_text(text)
    log.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8").replace(b"\n", b"\n\xef\xbb\xbf", 3))
    got, want = _events(log), _events(plain)
    assert got == want and "version" in {e["kind"] for e in got}


def _events(path):
    r = cli("parse", str(path))
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


def test_cr_only_line_ends_are_lines(tmp_path):
    """A log whose lines end in CR alone (a tool that wrote classic Mac ends): its OOM is read."""
    lines = GOOD[:30] + [OOM_LINE] + GOOD[30:40]
    log = tmp_path / "cr.log"
    log.write_bytes(("\r".join(lines) + "\r").encode())
    lf = tmp_path / "lf.log"
    lf.write_text("\n".join(lines) + "\n")
    got, want = _events(log), _events(lf)
    assert "oom" in {e["kind"] for e in got}
    assert [e["kind"] for e in got] == [e["kind"] for e in want]


def test_cr_only_ends_in_a_gzipped_log_and_on_stdin(tmp_path):
    lines = GOOD[:10] + [OOM_LINE]
    data = ("\r".join(lines) + "\r").encode()
    gz = tmp_path / "cr.log.gz"
    gz.write_bytes(gzip.compress(data))
    assert "oom" in {e["kind"] for e in _events(gz)}
    r = cli("parse", "-", stdin=data)
    assert "oom" in {json.loads(x)["kind"] for x in r.stdout.decode().splitlines()}


def test_a_carriage_return_after_an_lf_is_never_a_line_end(tmp_path):
    """A client's CR inside a record (a request id vLLM prints raw) never makes a line of its own,
    however long the record: the file had an LF first."""
    fake = OOM_LINE.replace("(EngineCore_DP0 pid=7) ", "(EngineCore_DP0 pid=7) ")
    request = ("(APIServer pid=1) INFO 08-04 02:50:00 [logger.py:43] Received request x" + ("\r" + fake) * 5000
               + ": params: None.")
    log = tmp_path / "x.log"
    log.write_text("\n".join(GOOD[:3] + [request] + GOOD[3:6]) + "\n")
    assert "oom" not in {e["kind"] for e in _events(log)}


def test_a_nul_hole_before_a_line_loses_nothing(tmp_path):
    """`vllm serve > LOG` (no O_APPEND) after logrotate's copytruncate: the writer's next line lands
    after a run of NULs as long as the file was. The line after them is read (it was unparsed)."""
    log = tmp_path / "hole.log"
    with open(log, "wb") as f:
        f.write(("\n".join(GOOD[:5]) + "\n").encode())
        f.write(b"\0" * 300_000)  # (real NUL bytes: the copy of such a file has them)
        f.write((OOM_LINE + "\n").encode())
        f.write(b"\0" * 10 + b"mid\0line\n")
    kinds = [e["kind"] for e in _events(log)]
    assert kinds.count("oom") == 1
    r = cli("parse", "--explain", str(log))
    rows = [row.split("\t") for row in r.stdout.decode().splitlines()]
    assert [row[3] for row in rows[-2:]] == [OOM_LINE, "midline"]


def test_the_markdown_report_prints_a_model_name_and_an_error_as_text(tmp_path):
    """A `|` in a model name added a table column, terminal escapes (a title, a clipboard write) reached
    the terminal, `<img onerror>` survived into the Markdown (the HTML page escaped it)."""
    evil = "m|x\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07<img src=x onerror=alert(1)>"
    log = tmp_path / "evil.log"
    log.write_text("\n".join([
        f"(APIServer pid=1) INFO 08-04 02:50:00 [api_server.py:1] vLLM API server version 0.11.2, serving model {evil}",
        f"(EngineCore_DP0 pid=7) ERROR 08-04 02:50:01 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. {evil}",
    ]) + "\n")
    r = cli("report", str(log))
    out = r.stdout.decode("utf-8")
    assert r.returncode == 0 and "\x1b" not in out and "\x07" not in out
    assert "<img" not in out.replace("\\<img", "")
    for row in out.splitlines():
        if row.startswith("| Model"):
            assert row.count("|") - row.count("\\|") == 3, row
    assert cli("report", str(log), "--html", str(tmp_path / "r.html")).returncode == 0
    page = (tmp_path / "r.html").read_text()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_an_alert_s_description_carries_no_chat_markup_or_mass_mention():
    from exporter.alerts.from_events import Alerts
    from exporter.parsers.events import Event

    words = "torch.OutOfMemoryError: CUDA out of memory. <!channel> @here <https://evil.example|click> \x1b[31m"
    a = Alerts(instance="h:1")
    a.observe("s", [Event("oom", {"message": words}, None, "EngineCore", 9)], now=1.8e9)
    (alert,) = a.pending(now=1.8e9)
    d = alert.annotations["description"]
    assert "<" not in d and ">" not in d and "\x1b" not in d and "@here" not in d
    assert "\u2039!channel\u203a" in d and "@\u200bhere" in d  # still readable
