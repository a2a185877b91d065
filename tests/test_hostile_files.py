"""Special files and a writer without O_APPEND: a FIFO or a device where the log was is reported and
never read (it froze the daemon: open() of a FIFO blocks), and `vllm serve > LOG` under logrotate's
copytruncate loses no line, notices every truncation and warns of no loss that did not happen."""

import asyncio
import os
import shutil
import signal
import time

import pytest
import structlog

from exporter.sources.file import FileSource
from tests.helpers import Exporter, ceiling, http_get, value, wait_until
from tests.test_source_file import Follow

LINE = '(APIServer pid=1) INFO 08-04 02:50:{s:02d} [launcher.py:46] Route: /v{n}, Methods: GET'


def _lines(start, count):
    return [LINE.format(s=n % 60, n=n) for n in range(start, start + count)]


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_a_fifo_or_device_as_the_source_is_reported_and_the_daemon_answers_and_stops(tmp_path, special):
    path = tmp_path / "v.log"
    if special == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)
    ex = Exporter("--source", f"v={path}", "--from-start").start()
    try:
        status, body = http_get(ex.url + "/metrics")
        assert status == 200 and value(body, "vllm_log_exporter_source_up", server="v") == 0
        assert http_get(ex.url + "/healthz")[0] == 200
        t = time.monotonic()
        ex.proc.send_signal(signal.SIGTERM)
        ex.proc.wait(ceiling(5))
        assert ex.proc.returncode == 0, time.monotonic() - t
        err = ex.proc.stderr.read()
        assert err.count("it is not a regular file") == 1, err[-3000:]
    finally:
        ex.stop()


def test_a_fifo_put_in_place_by_a_rotation_freezes_nothing_and_a_file_after_it_is_read(tmp_path):
    path = tmp_path / "v.log"
    path.write_text("")
    with Exporter("--source", f"v={path}") as ex:
        with open(path, "a") as f:
            f.write("\n".join(_lines(0, 3)) + "\n")
        wait_until(lambda: ex.value("vllm_log_exporter_lines_total", server="v") == 3, 20, what="3 lines")
        os.rename(path, tmp_path / "v.log.1")
        os.mkfifo(path)
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="v") == 0, 20, what="source down")
        time.sleep(1.0)  # a few polls at the FIFO: the daemon must still answer
        assert http_get(ex.url + "/healthz")[0] == 200
        os.unlink(path)
        path.write_text("\n".join(_lines(3, 2)) + "\n")
        wait_until(lambda: ex.value("vllm_log_exporter_lines_total", server="v") == 5, 20, what="5 lines")


class Writer:
    """`vllm serve > LOG`: one file description opened without O_APPEND, its offset kept across the
    truncations logrotate's copytruncate makes (so each truncation leaves a hole of NULs)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, lines):
        os.write(self.fd, ("\n".join(lines) + "\n").encode())

    def close(self):
        os.close(self.fd)


def copytruncate(path, copy):
    shutil.copyfile(path, copy)  # (logrotate copies the NULs as bytes: the copy has no hole)
    os.truncate(path, 0)


async def test_copytruncate_of_a_writer_without_o_append_loses_and_repeats_nothing(tmp_path, monkeypatch):
    """Seven copytruncates of a `>` writer, a few lines written between each copy and its truncate
    (the reader sometimes past the copy's end): every line read once, every truncation seen (one went
    unnoticed: the file's first 4 KiB were NULs before and after), and no "lines are lost" warning
    (it fired when the reader had itself read past the copy's end)."""
    path = tmp_path / "v.log"
    w = Writer(path)
    src = FileSource("t", str(path), poll_interval=0.02, from_start=True)
    written = []
    with structlog.testing.capture_logs() as logged:
        async with Follow(src) as fw:
            n = 0
            for rotation in range(7):
                batch = _lines(n, 40 + 30 * rotation)
                w.write(batch)
                written += batch
                n += len(batch)
                await fw.wait_for(len(written))
                late = _lines(n, 3)  # written after the copy, before the truncate: read from the file itself
                shutil.copyfile(path, tmp_path / f"v.log.{rotation + 1}")
                w.write(late)
                written += late
                n += 3
                await fw.wait_for(len(written))
                os.truncate(path, 0)
                await asyncio.sleep(0.1)
            last = _lines(n, 5)
            w.write(last)
            written += last
            await fw.wait_for(len(written))
            await asyncio.sleep(0.3)
    w.close()
    assert fw.lines == written
    assert fw.status.notes.count("truncated") == 7, fw.status.notes
    assert "tail_lost" not in fw.status.notes
    assert not [e for e in logged if "lost" in e["event"]], [e["event"] for e in logged]


async def test_a_truncation_missed_while_down_is_caught_by_the_head_after_a_hole(tmp_path):
    """The saved position's head tells the file from its next generation after a hole: the offset
    alone (still inside the file) would resume in the middle of the hole's NULs, past the new lines."""
    path = tmp_path / "v.log"
    w = Writer(path)
    w.write(_lines(0, 50))
    src = FileSource("t", str(path), poll_interval=0.02, from_start=True)
    async with Follow(src) as fw:
        await fw.wait_for(50)
        await asyncio.sleep(0.1)
    saved = src.checkpoint()
    w.write(_lines(50, 20))  # written while down, then copied away (a restart does not look in copies)
    copytruncate(path, tmp_path / "v.log.1")
    w.write(_lines(70, 200))  # lands after a hole as long as the file was, past the saved offset
    w.close()
    async with Follow(FileSource("t", str(path), poll_interval=0.02, resume=saved)) as fw:
        assert await fw.wait_for(200) == _lines(70, 200)


async def test_a_file_truncated_and_refilled_past_the_saved_offset_while_down_is_read_from_its_start(tmp_path):
    """copytruncate while the exporter was down, and the writer (O_APPEND) wrote more than the saved
    offset since: same inode, offset inside the file, but other first bytes. Resuming at the offset
    would start in some line's middle and skip the new generation's first lines."""
    path = tmp_path / "v.log"
    with open(path, "a") as f:
        f.write("\n".join(_lines(0, 30)) + "\n")
    src = FileSource("t", str(path), poll_interval=0.02, from_start=True)
    async with Follow(src) as fw:
        await fw.wait_for(30)
        await asyncio.sleep(0.1)
    saved = src.checkpoint()
    copytruncate(path, tmp_path / "v.log.1")
    with open(path, "a") as f:
        f.write("\n".join(_lines(1000, 80)) + "\n")
    assert os.path.getsize(path) > saved["offset"]
    async with Follow(FileSource("t", str(path), poll_interval=0.02, resume=saved)) as fw:
        assert await fw.wait_for(80) == _lines(1000, 80)


def test_a_position_saved_before_heads_were_kept_still_resumes(tmp_path):
    """A state file written by an older exporter holds no head: it resumes at its offset as before."""
    from exporter.sources.file import Position

    p = Position.from_checkpoint({"dev": 1, "ino": 2, "offset": 3})
    assert p.checkpoint() == {"dev": 1, "ino": 2, "offset": 3}
    bad = Position.from_checkpoint({"dev": 1, "ino": 2, "offset": 3, "head": 5, "head_len": -1})
    assert bad.checkpoint() == {"dev": 1, "ino": 2, "offset": 3}


async def test_a_file_whose_path_was_away_for_a_while_is_read_on_not_again(tmp_path):
    """The path gone for a few polls (renamed away and back, a directory moved and restored): the same
    file (device, inode, head) coming back is read on from where it was, not from its first line."""
    d = tmp_path / "d"
    d.mkdir()
    path = d / "v.log"
    with open(path, "a") as f:
        f.write("\n".join(_lines(0, 10)) + "\n")
    async with Follow(FileSource("t", str(path), poll_interval=0.02, from_start=True)) as fw:
        await fw.wait_for(10)
        os.rename(d, tmp_path / "away")
        await asyncio.sleep(0.2)
        with open(tmp_path / "away" / "v.log", "a") as f:
            f.write("\n".join(_lines(10, 3)) + "\n")
        await asyncio.sleep(0.2)
        os.rename(tmp_path / "away", d)
        with open(path, "a") as f:
            f.write("\n".join(_lines(13, 2)) + "\n")
        await fw.wait_for(15)
        await asyncio.sleep(0.5)
    assert fw.lines == _lines(0, 15)


async def test_cr_only_line_ends_from_the_start_from_a_saved_position_and_never_after_an_lf(tmp_path):
    """A file with classic Mac line ends is read line by line by the daemon too (from its first byte),
    and from a saved position in it; a file that had an LF is never read so again, from a position
    either, however many CRs and however long the record after it (a client's request id)."""
    cr = tmp_path / "cr.log"
    lines = _lines(0, 2000)  # (more than 64 KiB)
    cr.write_bytes(("\r".join(lines) + "\r").encode())
    src = FileSource("t", str(cr), poll_interval=0.02, from_start=True)
    async with Follow(src) as fw:
        await fw.wait_for(2000)
        await asyncio.sleep(0.1)
    assert fw.lines == lines
    saved = src.checkpoint()
    with open(cr, "ab") as f:
        f.write(("\r".join(_lines(2000, 3)) + "\r").encode())
    async with Follow(FileSource("t", str(cr), poll_interval=0.02, resume=saved)) as fw:
        assert await fw.wait_for(3) == _lines(2000, 3)
    lf = tmp_path / "lf.log"
    lf.write_text("\n".join(_lines(0, 3)) + "\n")
    src = FileSource("t", str(lf), poll_interval=0.02, from_start=True)
    async with Follow(src) as fw:
        await fw.wait_for(3)
        await asyncio.sleep(0.1)
    saved = src.checkpoint()
    fake = "(EngineCore_DP0 pid=7) ERROR 08-04 02:50:00 [core.py:1] torch.OutOfMemoryError: CUDA out of memory."
    request = "(APIServer pid=1) INFO 08-04 02:50:01 [logger.py:43] Received request x" + ("\r" + fake) * 2000
    with open(lf, "a") as f:
        f.write(request + ": params: None.\n")
    async with Follow(FileSource("t", str(lf), poll_interval=0.02, resume=saved)) as fw:
        got = await fw.wait_for(1)
        await asyncio.sleep(0.2)
    assert len(fw.lines) == 1 and got[0].startswith("(APIServer pid=1)")
