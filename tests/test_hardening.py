"""Faults a real host throws at the exporter: no line lost or counted twice, across rotations,
exporter restarts (with --state-file) and a container socket that vanishes and comes back."""

import asyncio
import os
import signal

from tests.helpers import Exporter, wait_until

LINE = 'Aug 04 02:50:{s:02d} h vllm[1]: (APIServer pid=53) INFO:     10.0.0.1:5 - "GET /health?n={n} HTTP/1.1" 200 OK'


def write(path, start, count):
    with open(path, "a") as f:
        for n in range(start, start + count):
            f.write(LINE.format(s=n % 60, n=n) + "\n")
    return start + count


def total(ex):
    return sum(ex.value("vllm_log_exporter_lines_total", server="gp", result=r) or 0 for r in ("parsed", "ignored", "unparsed"))


def test_k_lines_across_rotations_and_an_exporter_restart(tmp_path):
    log = tmp_path / "gp.log"
    log.write_text("")
    state = tmp_path / "state.json"
    args = ("--source", f"gp={log}", "--state-file", str(state))
    n = 0
    ex = Exporter(*args).start()
    try:
        n = write(log, n, 300)
        wait_until(lambda: total(ex) == 300, 20, what="300 lines")
        os.rename(log, tmp_path / "gp.log.1")
        n = write(log, n, 200)
        wait_until(lambda: total(ex) == 500, 20, what="500 lines")
    finally:
        ex.proc.send_signal(signal.SIGTERM)
        ex.proc.wait(15)
    first_run = 500
    assert state.exists()
    # while the exporter is down: more lines in the current file, then a rotation and a new file
    n = write(log, n, 100)
    os.rename(log, tmp_path / "gp.log.2")
    n = write(log, n, 150)
    with Exporter(*args) as ex2:
        wait_until(lambda: total(ex2) == 250, 20, what="the 250 lines written while down")
        import time

        time.sleep(1.0)  # nothing more may arrive: no line read twice
        assert total(ex2) == 250
        assert ex2.value("vllm_log_http_requests_total", server="gp", endpoint="/health") == 250
    assert first_run + 250 == n == 750


def test_state_file_that_is_garbage_is_ignored(tmp_path):
    log = tmp_path / "gp.log"
    log.write_text("old line\n")
    state = tmp_path / "state.json"
    state.write_text("{not json")
    with Exporter("--source", f"gp={log}", "--state-file", str(state)) as ex:
        write(log, 0, 3)
        wait_until(lambda: total(ex) == 3, 20, what="3 new lines")
    assert '"gp"' in state.read_text()


async def test_container_socket_vanishes_and_comes_back(tmp_path):
    from exporter.sources.container import ContainerSource
    from tests.test_source_container import FakeEngine, serve
    from tests.test_source_file import Follow

    sock = tmp_path / "podman.sock"
    engine = FakeEngine()
    runner = await serve(engine, sock)
    source = ContainerSource("gp", "grandpa", socket=str(sock), started_at=1785811440)
    async with Follow(source) as fw:
        await asyncio.sleep(0.3)
        for i in range(5):
            engine.add(1, f"line {i}")
        await fw.wait_for(5)
        engine.close()
        await runner.cleanup()
        sock.unlink(missing_ok=True)  # the podman service stopped: the socket is gone
        for _ in range(100):
            if fw.status.ups and fw.status.ups[-1] is False:
                break
            await asyncio.sleep(0.05)
        assert fw.status.ups[-1] is False
        engine2 = FakeEngine()
        engine2.log = list(engine.log)  # the container kept its log
        for i in range(5, 8):
            engine2.add(2, f"line {i}")
        runner2 = await serve(engine2, sock)
        try:
            lines = await fw.wait_for(8, timeout=20)
            assert [l.split(" ", 1)[1] for l in lines] == [f"line {i}" for i in range(8)]
            assert fw.status.ups[-1] is True and fw.status.restarts == 1
        finally:
            engine2.close()
            await runner2.cleanup()


def test_an_unreadable_log_is_a_permission_denied_warning_and_is_read_once_it_is_readable(tmp_path):
    import json
    import shutil
    import time

    import pytest

    if not shutil.which("setpriv"):
        pytest.skip("setpriv not installed")
    log = tmp_path / "gp.log"
    write(log, 0, 30)
    log.chmod(0o000)
    # root reads anything; without CAP_DAC_OVERRIDE/READ_SEARCH it meets the file mode like anyone
    ex = Exporter("--source", f"gp={log}", "--from-start",
                  wrapper=("setpriv", "--bounding-set=-dac_override,-dac_read_search"))
    ex.start()
    try:
        time.sleep(1.5)  # several polls: one warning, not one per poll
        assert ex.value("vllm_log_exporter_source_up", server="gp") == 0
        log.chmod(0o644)
        wait_until(lambda: total(ex) == 30, 20, what="the 30 lines once readable")
        assert ex.value("vllm_log_exporter_source_up", server="gp") == 1
    finally:
        err = ex.stop()
    events = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    denied = [e for e in events if e["event"] == "cannot read file: permission denied; retrying"]
    assert len(denied) == 1 and denied[0]["level"] == "warning" and denied[0]["path"] == str(log)
    assert denied[0]["uid"] == 0 and not [e for e in events if e["event"] == "waiting for file"]


def test_a_negative_or_past_the_end_offset_in_the_state_file_is_dropped_or_read_from_the_start(tmp_path):
    import json
    import os
    import time

    log = tmp_path / "gp.log"
    write(log, 0, 20)
    st = os.stat(log)
    state = tmp_path / "state.json"
    # negative: not a position at all; dropped with one warning, the source starts as configured (at the end)
    state.write_text(json.dumps({"version": 2, "sources": {"gp": {"source": f"file:{log}", "checkpoint": {
        "dev": st.st_dev, "ino": st.st_ino, "offset": -5}}}}))
    with Exporter("--source", f"gp={log}", "--state-file", str(state)) as ex:
        write(log, 20, 7)
        wait_until(lambda: total(ex) == 7, 20, what="the 7 lines after start")
        time.sleep(0.5)
        assert total(ex) == 7
        wait_until(lambda: json.loads(state.read_text())["sources"]["gp"]["checkpoint"]["offset"] == log.stat().st_size,
                   10, what="the state file rewritten with a real offset")
        err = ex.stop()
    assert err.count("file position is not three non-negative integers") == 1, err
    # past the end of the same file: it was truncated while we were down, so all of it is new
    state.write_text(json.dumps({"version": 2, "sources": {"gp": {"source": f"file:{log}", "checkpoint": {
        "dev": st.st_dev, "ino": st.st_ino, "offset": 10**12}}}}))
    with Exporter("--source", f"gp={log}", "--state-file", str(state)) as ex:
        wait_until(lambda: total(ex) == 27, 20, what="all 27 lines from the start")
        time.sleep(0.5)
        assert total(ex) == 27


def test_a_state_file_that_cannot_be_written_warns_once_is_counted_and_shown_in_healthz(tmp_path):
    import json
    import shutil
    import time

    import pytest

    from tests.helpers import http_get

    if not shutil.which("setpriv"):
        pytest.skip("setpriv not installed")
    folder = tmp_path / "state"
    folder.mkdir()
    state = folder / "state.json"
    log = tmp_path / "gp.log"
    log.write_text("")
    ex = Exporter("--source", f"gp={log}", "--state-file", str(state),
                  wrapper=("setpriv", "--bounding-set=-dac_override,-dac_read_search"))
    ex.start()
    try:
        n = write(log, 0, 10)
        wait_until(lambda: state.exists() and json.loads(state.read_text())["sources"]["gp"]["checkpoint"]["offset"]
                   == log.stat().st_size, 10, what="state written")
        folder.chmod(0o555)  # the exporter (root without DAC override) can no longer create the temporary file
        n = write(log, n, 10)
        wait_until(lambda: (ex.value("vllm_log_exporter_state_write_errors_total") or 0) >= 3, 10, what="3 failed writes")
        health = json.loads(http_get(ex.url + "/healthz")[1])
        assert health["status"] == "degraded" and "cannot write" in health["problems"]["state_file"]
        folder.chmod(0o755)
        wait_until(lambda: json.loads(http_get(ex.url + "/healthz")[1])["status"] == "ok", 10, what="healthy again")
        assert json.loads(state.read_text())["sources"]["gp"]["checkpoint"]["offset"] == log.stat().st_size
        time.sleep(0.1)
    finally:
        folder.chmod(0o755)
        err = ex.stop()
    events = [json.loads(x)["event"] for x in err.splitlines() if x.startswith("{")]
    assert events.count("state file not written; a restart will re-read from older positions") == 1, events
    assert events.count("state file written again") == 1
    assert n == 20
