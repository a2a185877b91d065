"""The journald source against real journal files (written by systemd-journal-remote) and the real
journalctl: every entry read exactly once, whatever restarts in between."""

import asyncio
import os
import signal
import stat
import sys

import pytest
from structlog.testing import capture_logs

from exporter.sources.base import Backoff
from exporter.sources.journald import JournaldSource
from tests.helpers import ROOT
from tests.journal import Journal, access, have_journal_tools, numbers
from tests.test_source_file import Follow

pytestmark = pytest.mark.skipif(not have_journal_tools(), reason="needs systemd-journal-remote and journalctl")


def wrapper(tmp_path):
    """The real journalctl, exec'd by a script that notes each child's pid (so a test can kill it)."""
    pids = tmp_path / "journalctl.pids"
    script = tmp_path / "journalctl"
    script.write_text(f'#!/bin/sh\necho $$ >> {pids}\nexec journalctl "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), pids


def source(journal, tmp_path, **kw):
    cmd, _ = wrapper(tmp_path)
    return JournaldSource("gp", "grandpa", journalctl=cmd, directory=str(journal.dir),
                          backoff=Backoff(0.05, 0.2), **kw)


async def settle(fw, n, timeout=20):
    lines = await fw.wait_for(n, timeout=timeout)
    await asyncio.sleep(0.3)  # nothing more may come
    return lines


async def test_from_start_reads_every_entry_not_the_last_ten(tmp_path):
    j = Journal(tmp_path / "j")
    j.write([access(i) for i in range(405)])
    j.write(["other unit"] * 5, unit="sshd.service")
    with capture_logs() as logs:
        async with Follow(source(j, tmp_path, from_start=True)) as fw:
            await settle(fw, 405)
            j.write([access(i) for i in range(405, 505)])
            lines = await settle(fw, 505)
    assert numbers(lines) == list(range(505))
    assert len(lines) == 505
    assert [e["event"] for e in logs if e["event"].startswith("reading")] == [
        "reading starts at the unit's first journal entry (from_start)"]


async def test_start_at_end_keeps_the_burst_written_right_after_start(tmp_path):
    j = Journal(tmp_path / "j")
    j.write([access(i) for i in range(50)])
    j.write(["noise after the last match"], unit="sshd.service")  # the tail entry does not match
    # The worst moment for a burst: after the tail was taken, before the follow starts. The wrapper
    # writes it right after the `-n 1` call returns.
    burst = tmp_path / "burst.py"
    burst.write_text(f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
                     "from pathlib import Path\nfrom tests.journal import Journal, access\n"
                     f"Journal(Path({str(j.dir)!r})).write([access(i) for i in range(50, 80)])\n")
    script = tmp_path / "journalctl-burst"
    script.write_text(f'#!/bin/sh\ncase " $* " in *" -n "*) journalctl "$@"; rc=$?; {sys.executable} {burst}; '
                      f'exit $rc;; esac\nexec journalctl "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    s = JournaldSource("gp", "grandpa", journalctl=str(script), directory=str(j.dir), backoff=Backoff(0.05, 0.2))
    async with Follow(s) as fw:
        lines = await settle(fw, 30)
    assert numbers(lines) == list(range(50, 80))


async def test_restarted_journalctl_resumes_after_the_cursor(tmp_path):
    j = Journal(tmp_path / "j")
    j.write([access(i) for i in range(10)])
    s = source(j, tmp_path, from_start=True)
    pids = tmp_path / "journalctl.pids"
    async with Follow(s) as fw:
        await settle(fw, 10)
        for round_ in range(3):
            pid = int(pids.read_text().split()[-1])
            os.kill(pid, signal.SIGKILL)
            base = 10 + round_ * 100
            j.write([access(i) for i in range(base, base + 50)])
            j.write(["noise"] * 3, unit="sshd.service")
            j.write([access(i) for i in range(base + 50, base + 100)])
            lines = await settle(fw, base + 100)
        assert fw.status.restarts == 3
    assert numbers(lines) == list(range(310))


async def test_cursor_survives_an_exporter_restart(tmp_path):
    j = Journal(tmp_path / "j")
    j.write([access(i) for i in range(20)])
    first = source(j, tmp_path)
    with capture_logs() as logs:
        async with Follow(first) as fw:
            j.write([access(i) for i in range(20, 40)])
            assert numbers(await settle(fw, 20)) == list(range(20, 40))
    cp = first.checkpoint()
    j.write([access(i) for i in range(40, 90)])  # while the exporter is down
    with capture_logs() as logs_after:
        async with Follow(source(j, tmp_path, resume=cp)) as fw:
            lines = await settle(fw, 50)
    assert numbers(lines) == list(range(40, 90))
    # where reading began is said, once each (the first time with how to read what was there)
    [tail] = [e for e in logs if e["event"].startswith("reading")]
    assert tail["event"].startswith("reading starts after the unit's newest journal entry")
    assert "--from-start" in tail["hint"] and tail["unit"] == "grandpa"
    [resumed] = [e for e in logs_after if e["event"].startswith("reading")]
    assert resumed["event"] == "reading resumes after the saved journal cursor (state file)"


async def test_no_journal_yet_is_down_then_read_from_its_first_entry(tmp_path):
    d = tmp_path / "later"
    d.mkdir()
    j = None
    with capture_logs() as logs:
        async with Follow(JournaldSource("gp", "grandpa", directory=str(d), backoff=Backoff(0.05, 0.2))) as fw:
            await asyncio.sleep(0.5)
            assert fw.status.ups and not any(fw.status.ups)
            j = Journal(d)
            j.write([access(i) for i in range(25)])
            lines = await settle(fw, 25)
            assert fw.status.ups[-1] is True
    assert numbers(lines) == list(range(25))
    assert [e["event"] for e in logs if e["event"].startswith("reading")] == [
        "reading starts at the unit's first journal entry: the journal holds none yet"]


async def test_messages_journald_stores_as_bytes_or_long(tmp_path):
    j = Journal(tmp_path / "j")
    esc = "\x1b[1;36m(APIServer pid=53)\x1b[0;0m INFO 08-04 02:44:21 [api_server.py:1] coloured"
    j.write([esc.encode(), b"(APIServer pid=53) bad \xff byte", "first half\nsecond half", "x" * 100_000])
    j.write(["from a rootless user unit"], field="_SYSTEMD_USER_UNIT")
    async with Follow(source(j, tmp_path, from_start=True)) as fw:
        lines = await settle(fw, 6)
    bodies = [ln.split(" ", 1)[1] for ln in lines]
    assert bodies[0] == esc
    assert bodies[1] == "(APIServer pid=53) bad \ufffd byte"
    assert bodies[2:4] == ["first half", "second half"]
    assert bodies[4] == "x" * 100_000
    assert bodies[5] == "from a rootless user unit"
    assert all(ln[:4] == "20" + ln[2:4] and ln[10] == "T" for ln in lines)  # the journal's own stamp leads


def http_200s(ex) -> float:
    return ex.value("vllm_log_http_requests_total", status="200") or 0


def test_exporter_with_state_file_counts_every_entry_once_across_restarts(tmp_path):
    """The real exporter, following real journal files, stopped and started again with a state file."""
    from tests.helpers import Exporter, wait_until

    j = Journal(tmp_path / "j")
    j.write([access(i) for i in range(1, 31)])  # before the exporter: not counted (it starts at the end)
    state = tmp_path / "state.json"
    args = ("--source", "journald:grandpa", "--journal-directory", str(j.dir), "--state-file", str(state))
    written = {}
    with Exporter(*args) as ex:
        # (the source is up once it took the journal's tail: what is written before that is "before the
        # exporter", so the 40 are written after; on a loaded machine /metrics answers well before it)
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="grandpa") == 1, 20, what="source up")
        j.write([access(i) for i in range(31, 71)])
        written["first run"] = 40
        try:
            wait_until(lambda: http_200s(ex) >= 40, 20, what="40 lines counted")
        except AssertionError as e:
            raise AssertionError(f"{e}; counted {http_200s(ex)}; the exporter said:\n{ex.stop()[-3000:]}") from None
        wait_until(lambda: '"cursor"' in (state.read_text() if state.exists() else ""), 10, what="state saved")
        assert ex.value("vllm_log_exporter_source_up", server="grandpa") == 1
        counted = {"first run": http_200s(ex)}
    j.write([access(i) for i in range(71, 121)])  # 50 written while the exporter is down
    with Exporter(*args) as ex:
        written["while down"] = 50
        wait_until(lambda: http_200s(ex) >= 50, 20, what="the 50 written while down")
        j.write([access(i) for i in range(121, 141)])
        wait_until(lambda: http_200s(ex) >= 70, 20, what="70 lines counted")
        import time
        time.sleep(0.5)
        counted["second run"] = http_200s(ex)
    assert counted == {"first run": 40, "second run": 70}, (written, counted)


def test_exporter_reports_a_missing_journal_as_down(tmp_path):
    from tests.helpers import Exporter, wait_until

    empty = tmp_path / "nothing"
    empty.mkdir()
    with Exporter("--source", "journald:grandpa", "--journal-directory", str(empty)) as ex:
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="grandpa") == 0, 10, what="source down")
        j = Journal(empty)
        j.write([access(i) for i in range(5)])
        wait_until(lambda: http_200s(ex) == 5, 20, what="the first entries once the journal exists")
        assert ex.value("vllm_log_exporter_source_up", server="grandpa") == 1
        log = ex.stop()
    assert "no journal files in" in log


def test_exporter_reads_what_systemd_logged_of_the_unit_and_nothing_of_other_units(tmp_path):
    """PID 1's lines about the unit (UNIT=, as `journalctl -u` matches them) and a user manager's
    (USER_UNIT=, rootless Quadlet) reach the parser; PID 1's lines about other units do not."""
    from tests.helpers import Exporter, wait_until

    j = Journal(tmp_path / "j")
    j.write([access(1)])
    args = ("--source", "journald:grandpa", "--journal-directory", str(j.dir))
    with Exporter(*args) as ex:
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="grandpa") == 1, 20, what="source up")
        pid1 = {"field": "UNIT", "unit": "grandpa.service", "_PID": "1", "SYSLOG_IDENTIFIER": "systemd"}
        j.write(["grandpa.service: Main process exited, code=killed, status=9/KILL",
                 "grandpa.service: Failed with result 'signal'.",
                 "grandpa.service: Scheduled restart job, restart counter is at 1."], **pid1)
        # about another unit, and a process other than PID 1 claiming the unit: neither is read
        j.write(["sshd.service: Main process exited, code=exited, status=255/EXCEPTION",
                 "sshd.service: Scheduled restart job, restart counter is at 7."],
                field="UNIT", unit="sshd.service", _PID="1", SYSLOG_IDENTIFIER="systemd")
        j.write(["grandpa.service: Scheduled restart job, restart counter is at 99."],
                field="UNIT", unit="grandpa.service", _PID="4242", SYSLOG_IDENTIFIER="impostor")
        # a rootless Quadlet unit's manager (systemd --user) speaks with USER_UNIT=
        j.write(["grandpa.service: Scheduled restart job, restart counter is at 2."],
                field="USER_UNIT", unit="grandpa.service", _PID="1800", SYSLOG_IDENTIFIER="systemd")
        j.write([access(2)])  # the last entry: once it is counted, everything before it was read
        wait_until(lambda: http_200s(ex) == 1, 20, what="the entries after the start")
        assert ex.value("vllm_log_process_exits_total", server="grandpa", supervisor="systemd", how="killed",
                        status="SIGKILL") == 1
        assert ex.value("vllm_log_unit_failures_total", server="grandpa", result="signal") == 1
        assert ex.value("vllm_log_restarts_total", server="grandpa") == 2
        # the kill came with no vLLM line: the supervisor's word is the death
        assert ex.value("vllm_log_errors_total", server="grandpa", kind="engine_dead") == 1
