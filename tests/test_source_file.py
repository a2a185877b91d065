import asyncio
import os
import time


from exporter.sources.file import FileSource


class Rec:
    def __init__(self):
        self.ups = []
        self.restarts = 0
        self.notes = []
        self.waits = []

    def waiting(self, reason):
        self.waits.append(reason)

    def up(self, up):
        self.ups.append(up)

    def restarted(self):
        self.restarts += 1

    def note(self, event):
        self.notes.append(event)


class Follow:
    """Run a source in the background and collect its lines."""

    def __init__(self, source):
        self.source = source
        self.status = Rec()
        self.lines: list[str] = []

    async def __aenter__(self):
        async def run():
            async for batch in self.source.batches(self.status):
                self.lines.extend(batch)

        self.task = asyncio.create_task(run())
        await asyncio.sleep(0.15)
        return self

    async def __aexit__(self, *exc):
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def wait_for(self, n: int, timeout: float = 5.0):
        """Until ``n`` lines came; ``timeout`` is an idle machine's, stretched (tests.helpers.ceiling)."""
        from tests.helpers import ceiling

        deadline = time.monotonic() + ceiling(timeout)
        while time.monotonic() < deadline:
            if len(self.lines) >= n:
                return self.lines
            await asyncio.sleep(0.02)
        raise AssertionError(f"only {len(self.lines)} of {n} lines arrived: {self.lines}")


def src(path, **kw):
    return FileSource("t", str(path), poll_interval=0.02, **kw)


def append(path, *lines, newline=True):
    with open(path, "a") as f:
        f.write("".join(l + ("\n" if newline else "") for l in lines))


async def test_starts_at_end_by_default_then_follows(tmp_path):
    p = tmp_path / "v.log"
    append(p, "old")
    async with Follow(src(p)) as fw:
        append(p, "a", "b")
        assert await fw.wait_for(2) == ["a", "b"]
        assert fw.status.ups == [True]


async def test_from_start_reads_what_is_there(tmp_path):
    p = tmp_path / "v.log"
    append(p, "old1", "old2")
    async with Follow(src(p, from_start=True)) as fw:
        append(p, "new")
        assert await fw.wait_for(3) == ["old1", "old2", "new"]


async def test_rename_rotation_loses_nothing(tmp_path):
    p = tmp_path / "v.log"
    append(p, "")
    async with Follow(src(p)) as fw:
        append(p, "1", "2")
        await fw.wait_for(2)
        os.rename(p, tmp_path / "v.log.1")
        append(tmp_path / "v.log.1", "3")  # the writer still had the old file open
        append(p, "4", "5")
        assert await fw.wait_for(5) == ["1", "2", "3", "4", "5"]
        assert fw.status.restarts == 1


async def test_copytruncate(tmp_path):
    p = tmp_path / "v.log"
    append(p, "")
    async with Follow(src(p)) as fw:
        append(p, "first line that is long enough", "second")
        await fw.wait_for(2)
        with open(p, "w"):
            pass
        await asyncio.sleep(0.1)
        append(p, "after")
        assert await fw.wait_for(3) == ["first line that is long enough", "second", "after"]
        assert fw.status.restarts == 1


async def test_delete_and_recreate(tmp_path):
    p = tmp_path / "v.log"
    append(p, "")
    async with Follow(src(p)) as fw:
        append(p, "a")
        await fw.wait_for(1)
        os.unlink(p)
        for _ in range(50):
            if False in fw.status.ups:
                break
            await asyncio.sleep(0.02)
        assert fw.status.ups[-1] is False
        append(p, "b")
        assert await fw.wait_for(2) == ["a", "b"]
        assert fw.status.ups[-1] is True


async def test_file_that_does_not_exist_yet(tmp_path):
    p = tmp_path / "later.log"
    async with Follow(src(p)) as fw:
        assert fw.status.ups == [False]
        append(p, "x", "y")
        assert await fw.wait_for(2) == ["x", "y"]  # a new file is read from its start
        assert fw.status.restarts == 0


async def test_a_file_whose_directory_does_not_exist_is_said_at_once_and_read_when_it_comes(tmp_path):
    p = tmp_path / "vlm" / "vllm.log"  # a mistyped directory
    async with Follow(src(p)) as fw:
        assert fw.status.waits == [f"no such directory: {tmp_path / 'vlm'}"]
        p.parent.mkdir()
        append(p, "x")
        assert await fw.wait_for(1) == ["x"]
        assert fw.status.waits[-1] is None  # waiting no more


async def test_a_file_absent_for_long_is_said_once_and_a_short_absence_is_not(tmp_path, monkeypatch):
    import exporter.sources.file as file_source

    monkeypatch.setattr(file_source, "MISSING_WARN_SECONDS", 0.5)  # (30 s in the exporter)
    p = tmp_path / "vllm.log"
    async with Follow(src(p)) as fw:
        assert fw.status.waits == []  # the directory is there: a file may come
        from tests.helpers import wait_until

        await asyncio.to_thread(wait_until, lambda: fw.status.waits, 5, 0.05, "the warning")
        assert fw.status.waits == [f"no such file: {p}"]
        await asyncio.sleep(0.3)
        assert len(fw.status.waits) == 1  # once
        append(p, "x")
        assert await fw.wait_for(1) == ["x"] and fw.status.waits == [f"no such file: {p}", None]
        # a rotation's moment without the file is no reason to warn
        p.rename(tmp_path / "vllm.log.1")
        append(p, "y")
        assert await fw.wait_for(2) == ["x", "y"]
        await asyncio.sleep(0.6)
        assert fw.status.waits == [f"no such file: {p}", None]


async def test_partial_line_is_held_until_its_newline(tmp_path):
    p = tmp_path / "v.log"
    append(p, "")
    async with Follow(src(p, partial_timeout=30)) as fw:
        append(p, "hel", newline=False)
        await asyncio.sleep(0.2)
        assert fw.lines == []
        append(p, "lo")
        assert await fw.wait_for(1) == ["hello"]


async def test_partial_line_is_released_after_the_timeout(tmp_path):
    p = tmp_path / "v.log"
    append(p, "")
    async with Follow(src(p, partial_timeout=0.2)) as fw:
        append(p, "no newline ever", newline=False)
        assert await fw.wait_for(1) == ["no newline ever"]


async def test_overlong_line_is_cut_once_and_memory_bounded(tmp_path):
    p = tmp_path / "v.log"
    append(p, "")
    async with Follow(src(p, max_line=1000)) as fw:
        append(p, "a" * 2500 + "b" * 2500, "next")
        lines = await fw.wait_for(2)
        # its first 750 bytes and last 250 (exporter.framing.lines.cut_line), passed on once
        assert lines == ["a" * 750 + "b" * 250, "next"]


async def test_invalid_utf8_nul_and_crlf(tmp_path):
    p = tmp_path / "v.log"
    append(p, "")
    async with Follow(src(p)) as fw:
        with open(p, "ab") as f:
            f.write(b"bad \xff\xfe byte\nnul\x00here\ncrlf\r\n")
        lines = await fw.wait_for(3)
        assert lines[0] == "bad \ufffd\ufffd byte" and lines[1] == "nulhere" and lines[2] == "crlf\r"


async def position_after(p, *lines):
    """Where a source following ``p`` (empty at first) stood once it had taken ``lines``."""
    append(p, "")
    s = src(p)
    async with Follow(s) as fw:
        append(p, *lines)
        await fw.wait_for(len(lines))
        await asyncio.sleep(0.1)
    return s.position


async def test_position_resumes_in_the_same_file(tmp_path):
    p = tmp_path / "v.log"
    pos = await position_after(p, "a", "b")
    assert pos.offset == os.path.getsize(p)
    append(p, "c", "d")
    async with Follow(src(p, resume=pos)) as fw:
        assert await fw.wait_for(2) == ["c", "d"]


async def test_resume_finds_the_file_rotated_while_we_were_down(tmp_path):
    p = tmp_path / "v.log"
    pos = await position_after(p, "1", "2")
    append(p, "3")  # written after we stopped, before the rotation
    os.rename(p, tmp_path / "v.log.1")
    append(p, "4", "5")
    async with Follow(src(p, resume=pos)) as fw:
        assert await fw.wait_for(3) == ["3", "4", "5"]
        await asyncio.sleep(0.2)
        assert fw.lines == ["3", "4", "5"]


async def test_resume_after_truncation_while_down_reads_from_zero(tmp_path):
    p = tmp_path / "v.log"
    append(p, "")
    s = src(p)
    async with Follow(s) as fw:
        append(p, "a long line before truncation")
        await fw.wait_for(1)
        await asyncio.sleep(0.1)
    pos = s.position
    with open(p, "w") as f:
        f.write("x\n")
    from exporter.sources.file import Position

    assert isinstance(pos, Position)
    async with Follow(src(p, resume=pos)) as fw:
        assert await fw.wait_for(1) == ["x"]


async def test_catching_up_a_backlog_lets_other_tasks_run(tmp_path):
    """A big file read from the start must not starve the event loop (where /metrics is answered)."""
    p = tmp_path / "big.log"
    with open(p, "w") as f:
        for i in range(40000):
            f.write(f"line {i} " + "x" * 100 + "\n")  # ~4.5 MB: many full chunks
    ticks = 0
    seen_at_ticks = []

    async def other():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    t = asyncio.create_task(other())
    try:
        n = 0
        async for batch in src(p, from_start=True).batches(Rec()):
            n += len(batch)
            seen_at_ticks.append(ticks)
            time.sleep(0.003)  # the pipeline's work on the batch: the source gives way every ~10 ms of it
            if n >= 40000:
                break
    finally:
        t.cancel()
    assert n == 40000
    # the other task ran while the backlog was still being read, not only after it
    assert len(seen_at_ticks) > 5 and seen_at_ticks[len(seen_at_ticks) // 2] > 0


def numbered(prefix, start, count, width=0):
    return [f"{prefix} line {n:06d} " + "x" * width for n in range(start, start + count)]


async def _copytruncate_case(tmp_path, refill: int, compress: bool):
    import gzip
    import shutil

    p = tmp_path / "v.log"
    append(p, *numbered("first", 0, 100))
    async with Follow(FileSource("t", str(p), from_start=True, poll_interval=1.0)) as fw:
        await fw.wait_for(100)
        # all within one poll: a tail we have not read, logrotate's copy, its truncate, and a refill
        append(p, *numbered("tail", 100, 50))
        if compress:
            with open(p, "rb") as src, gzip.open(str(p) + ".1.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
        else:
            shutil.copyfile(p, str(p) + ".1")
        os.truncate(p, 0)
        append(p, *numbered("after", 150, refill, width=60))
        lines = await fw.wait_for(150 + refill, timeout=10)
        await asyncio.sleep(1.2)  # another poll: nothing read twice
    assert lines == numbered("first", 0, 100) + numbered("tail", 100, 50) + numbered("after", 150, refill, width=60)
    assert fw.status.notes == ["truncated"]


async def test_copytruncate_refilled_past_our_offset_within_one_poll_is_seen_and_the_tail_read_from_the_copy(tmp_path):
    await _copytruncate_case(tmp_path, refill=200, compress=False)


async def test_copytruncate_to_a_shorter_file_reads_the_unread_tail_from_the_copy(tmp_path):
    await _copytruncate_case(tmp_path, refill=5, compress=False)


async def test_copytruncate_with_a_compressed_copy(tmp_path):
    await _copytruncate_case(tmp_path, refill=200, compress=True)


async def test_copytruncate_with_no_copy_says_what_was_lost(tmp_path):
    from structlog.testing import capture_logs

    p = tmp_path / "v.log"
    append(p, *numbered("first", 0, 10))
    with capture_logs() as logs:
        async with Follow(FileSource("t", str(p), from_start=True, poll_interval=0.5)) as fw:
            await fw.wait_for(10)
            append(p, *numbered("tail", 10, 5))
            os.truncate(p, 0)
            append(p, "new")
            lines = await fw.wait_for(11, timeout=10)
    assert lines == numbered("first", 0, 10) + ["new"]
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "file truncated and no copy of it found: lines written after the last read are lost"]
    assert fw.status.notes == ["truncated", "tail_lost"]


async def test_rotations_that_outran_one_poll_leave_no_file_unread(tmp_path):
    import shutil

    p = tmp_path / "v.log"
    older = tmp_path / "v.log.3"
    older.write_text("\n".join(numbered("older", 0, 5)) + "\n")
    os.utime(older, (time.time() - 3600, time.time() - 3600))
    append(p, *numbered("a", 0, 50))
    async with Follow(FileSource("t", str(p), from_start=True, poll_interval=1.0)) as fw:
        await fw.wait_for(50)
        append(p, *numbered("a", 50, 10))          # not read yet
        os.rename(p, str(p) + ".1")                # rotation 1
        append(p, *numbered("b", 0, 30))           # a whole file we never open
        shutil.copyfile(str(p) + ".1", str(p) + ".bak")  # a backup of the old file: not new lines
        os.rename(str(p) + ".1", str(p) + ".2")    # rotation 2
        os.rename(p, str(p) + ".1")
        append(p, *numbered("c", 0, 20))
        lines = await fw.wait_for(110, timeout=10)
        await asyncio.sleep(1.2)
    assert lines == numbered("a", 0, 60) + numbered("b", 0, 30) + numbered("c", 0, 20)
    assert fw.status.notes == ["rotated_late"]


# inotify (exporter.sources.notify) against the real kernel: a poll interval of a minute means any
# line that arrives within the test's few seconds was woken by inotify, not by the poll.
SLOW_POLL = 60.0


async def test_inotify_wakes_the_source_long_before_its_poll(tmp_path):
    p = tmp_path / "v.log"
    p.write_text("")
    async with Follow(FileSource("t", str(p), poll_interval=SLOW_POLL)) as fw:
        for i in range(5):
            append(p, f"line {i}")
            await fw.wait_for(i + 1, timeout=3)
    assert fw.lines == [f"line {i}" for i in range(5)]


async def test_inotify_sees_a_rename_rotation_and_the_new_file(tmp_path):
    p = tmp_path / "v.log"
    append(p, "old 1")
    async with Follow(FileSource("t", str(p), from_start=True, poll_interval=SLOW_POLL)) as fw:
        await fw.wait_for(1, timeout=3)
        append(p, "old 2")
        await fw.wait_for(2, timeout=3)
        os.rename(p, str(p) + ".1")
        await asyncio.sleep(0.1)
        append(p, "new 1")
        await fw.wait_for(3, timeout=3)
        append(p, "new 2")  # written to the new file: its watch replaced the old one's
        await fw.wait_for(4, timeout=3)
    assert fw.lines == ["old 1", "old 2", "new 1", "new 2"]


async def test_inotify_follows_a_symlinked_path_to_its_target(tmp_path):
    # as Kubernetes' /var/log/containers/*.log: the target lives in another folder
    target_dir = tmp_path / "pods"
    target_dir.mkdir()
    target = target_dir / "0.log"
    target.write_text("")
    link = tmp_path / "c.log"
    link.symlink_to(target)
    async with Follow(FileSource("t", str(link), poll_interval=SLOW_POLL)) as fw:
        append(target, "through the link")
        await fw.wait_for(1, timeout=3)


async def test_inotify_ignores_other_files_in_the_folder(tmp_path):
    from exporter.sources import notify

    p = tmp_path / "v.log"
    p.write_text("")
    other = tmp_path / "other.log"
    wakes = []

    async def waiter(w):
        while True:
            await w.wait(SLOW_POLL)
            wakes.append(time.monotonic())

    w = notify.Watch(str(p))
    assert w.active
    t = asyncio.create_task(waiter(w))
    try:
        for i in range(20):
            append(other, f"noise {i}")
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert wakes == []
        append(p, "ours")
        for _ in range(100):
            if wakes:
                break
            await asyncio.sleep(0.02)
        assert len(wakes) == 1
    finally:
        t.cancel()
        w.close()


async def test_without_inotify_the_source_still_polls(tmp_path):
    p = tmp_path / "v.log"
    p.write_text("")
    async with Follow(FileSource("t", str(p), poll_interval=0.1, notify=False)) as fw:
        append(p, "polled")
        await fw.wait_for(1, timeout=3)
        os.rename(p, str(p) + ".1")
        append(p, "after rotation")
        await fw.wait_for(2, timeout=3)
    assert fw.lines == ["polled", "after rotation"]


async def test_a_renamed_file_is_still_read_while_its_writer_has_not_reopened(tmp_path):
    # logrotate renames, then signals the writer, which reopens a moment later: inotify sees the
    # rename at once, so what the writer wrote to the old file in between must still be read
    p = tmp_path / "v.log"
    p.write_text("")
    async with Follow(FileSource("t", str(p), poll_interval=0.05)) as fw:
        with open(p, "a", buffering=1) as writer:
            writer.write("before\n")
            await fw.wait_for(1)
            os.rename(p, str(p) + ".1")
            await asyncio.sleep(0.3)  # the source has seen the rename by now
            writer.write("late, to the old file\n")
        await asyncio.sleep(0.3)
        append(p, "new file")
        await fw.wait_for(3)
    assert sorted(fw.lines) == sorted(["before", "late, to the old file", "new file"])


async def test_when_the_kernel_refuses_a_watch_the_file_is_polled_and_that_is_said_once(tmp_path, monkeypatch):
    # A stand-in for the watch limit (fs.inotify.max_user_watches is machine-wide: a test must not
    # lower it): inotify_add_watch failing with ENOSPC, as the real one does at the limit.
    import errno as _errno

    from structlog.testing import capture_logs

    from exporter.sources import notify

    def refuse(self, watch, path, mask, name):
        raise OSError(_errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(notify._Hub, "add", refuse)
    p = tmp_path / "v.log"
    p.write_text("")
    with capture_logs() as logs:
        async with Follow(FileSource("t", str(p), poll_interval=0.1)) as fw:
            for i in range(3):
                append(p, f"line {i}")
                await fw.wait_for(i + 1, timeout=3)
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == ["inotify watch not added: this file is polled"]


async def test_a_folder_deleted_and_made_again_is_followed_again(tmp_path):
    # the kernel drops the watches with the folder (IN_IGNORED): the file is polled until it is
    # opened again, then watched again
    import shutil

    folder = tmp_path / "logs"
    folder.mkdir()
    p = folder / "v.log"
    p.write_text("")
    async with Follow(FileSource("t", str(p), poll_interval=0.2)) as fw:
        append(p, "one")
        await fw.wait_for(1, timeout=3)
        shutil.rmtree(folder)
        await asyncio.sleep(0.5)  # the source sees the file gone (polled: its watches went with it)
        folder.mkdir()
        append(p, "two")
        await fw.wait_for(2, timeout=5)
        await asyncio.sleep(0.5)
        append(p, "three")
        await fw.wait_for(3, timeout=5)
    assert fw.lines == ["one", "two", "three"]


async def _copytruncate_while_reading(tmp_path, tail: int, refill: list[str], while_copy_read, done):
    """The source reads 100 lines of g1; then, all at once, ``tail`` more g1 lines, logrotate's
    copy, the truncate and ``refill``; when the source hands on the copy's first line,
    ``while_copy_read(p)`` runs (once). Until ``done(lines)``; returns (lines, status, whether
    while_copy_read ran)."""
    import shutil

    p = tmp_path / "v.log"
    append(p, *numbered("g1", 0, 100))
    src = FileSource("t", str(p), from_start=True, poll_interval=0.05)
    status = Rec()
    got: list[str] = []
    acted = False

    async def run():
        nonlocal acted
        async for batch in src.batches(status):
            got.extend(batch)
            if len(got) == 100:
                append(p, *numbered("g1", 100, tail))
                shutil.copyfile(p, str(p) + ".1")
                os.truncate(p, 0)
                append(p, *refill)
            elif not acted and any(line.startswith("g1 line 000100") for line in batch):
                acted = True
                while_copy_read(p)
            if done(got):
                return

    await asyncio.wait_for(run(), timeout=10)
    return got, status, acted


async def test_a_generation_truncated_away_while_the_copy_was_read_is_read_from_its_own_copy(tmp_path):
    # A writer faster than the exporter reads, and copytruncate every so often: while the source
    # reads logrotate's copy of one generation, the next rotation copies and truncates the
    # generation that followed. That one is then only in the newer copy.
    import shutil

    def next_rotation(p):  # logrotate's way: the older copy renamed first
        os.rename(str(p) + ".1", str(p) + ".2")
        shutil.copyfile(p, str(p) + ".1")
        os.truncate(p, 0)
        append(p, *numbered("g3", 0, 50))

    got, status, rotated_again = await _copytruncate_while_reading(
        tmp_path, 50, numbered("g2", 0, 200, width=40), next_rotation, lambda got: len(got) >= 400)
    assert rotated_again
    assert got == numbered("g1", 0, 150) + numbered("g2", 0, 200, width=40) + numbered("g3", 0, 50)
    assert status.notes == ["truncated", "truncated"]


def _copy_onto_the_copy(p):
    import shutil

    shutil.copyfile(p, str(p) + ".1")  # the same inode, other lines: what was still unread is gone


def _g2_arrived(got):
    return any(line.startswith("g2") for line in got)


async def test_a_copy_rewritten_in_place_while_it_was_read_is_counted_as_lost(tmp_path):
    # a tail longer than one read of the copy: the rewrite comes in the middle of reading it
    got, status, rewritten = await _copytruncate_while_reading(
        tmp_path, 12000, numbered("g2", 0, 10), _copy_onto_the_copy, _g2_arrived)
    assert rewritten and status.notes[:2] == ["truncated", "tail_lost"]
    assert len([line for line in got if line.startswith("g1")]) < 100 + 12000


async def test_a_copy_rewritten_after_it_was_read_loses_nothing(tmp_path):
    # one read of the copy takes all of its tail
    got, status, rewritten = await _copytruncate_while_reading(
        tmp_path, 50, numbered("g2", 0, 10), _copy_onto_the_copy, _g2_arrived)
    assert rewritten and status.notes == ["truncated"]
    assert got[:150] == numbered("g1", 0, 150)


async def test_says_where_reading_starts(tmp_path):
    """A first try on a file that already holds a run must not show silent zeros: the log says where
    reading begins and, when it is the end, how to read what is there."""
    from structlog.testing import capture_logs

    p = tmp_path / "v.log"
    append(p, "old1", "old2")
    size = os.path.getsize(p)

    async def said(**kw):
        with capture_logs() as logs:
            s = src(kw.pop("path", p), **kw)
            async with Follow(s):
                pass
        return [e for e in logs if e["event"].startswith(("reading", "waiting for file"))], s

    [end], s = await said()
    assert end["event"].startswith("reading starts at the end of the file") and end["skipped_bytes"] == size
    assert "--from-start" in end["hint"] and end["path"] == str(p)
    [start], _ = await said(from_start=True)
    assert start["event"].startswith("reading starts at the file's first line") and start["size"] == size
    append(p, "new")
    [resumed], _ = await said(resume=s.position)
    assert resumed["event"].startswith("reading resumes at the saved offset") and resumed["offset"] == size
    assert resumed["unread_bytes"] == 4
    from exporter.sources.file import Position

    [shorter], _ = await said(resume=Position(s.position.dev, s.position.ino, size * 10))
    assert "shorter than the saved offset" in shorter["event"]
    [replaced], _ = await said(resume=Position(s.position.dev, s.position.ino + 1, 3))
    assert "not the file the saved offset was in" in replaced["event"]
    [waiting], _ = await said(path=tmp_path / "later.log")
    assert waiting["event"] == "waiting for file" and waiting["then"] == "read from its first line"
