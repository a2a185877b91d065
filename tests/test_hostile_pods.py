"""Pods are never counted twice: a pod directory that cannot be listed for a few seconds, or more
pods than file descriptors (200 pods under a limit of 128 looped, each pod's lines counted twice within
12 s, with "Too many open files" tracebacks), cost at most a delay. A file's identity (device, inode,
head) decides whether it is new, never only that a look found it again."""

import json
import shutil

import pytest

from tests.helpers import Exporter, samples, value, wait_until, http_get
from tests.test_source_pods import cri_access, write


def _requests(ex, server):
    return ex.value("vllm_log_http_requests_total", server=server) or 0


def test_a_pod_directory_unlistable_for_a_few_seconds_is_not_read_again(tmp_path):
    if not shutil.which("setpriv"):
        pytest.skip("setpriv not installed")
    pods = tmp_path / "pods"
    a = pods / "llm_vllm-a_uid-1" / "vllm" / "0.log"
    b = pods / "llm_vllm-b_uid-2" / "vllm" / "0.log"
    write(a, *[cri_access("stdout", i) for i in range(3)])
    write(b, *[cri_access("stdout", i) for i in range(5)])
    ex = Exporter("--source", str(pods / "*_vllm-*" / "*" / "*.log"), "--from-start",
                  wrapper=("setpriv", "--bounding-set=-dac_override,-dac_read_search"))
    ex.start()
    try:
        wait_until(lambda: _requests(ex, "llm/vllm-b") == 5, 15, what="b's 5 lines")
        b.parent.parent.chmod(0o000)  # three looks (6 s) it cannot list: its file was let go after two
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="llm/vllm-b") == 0, 15, what="b reported")
        write(b, *[cri_access("stdout", i) for i in range(5, 8)])  # written meanwhile (as root)
        import time

        time.sleep(6.5)
        b.parent.parent.chmod(0o755)
        wait_until(lambda: _requests(ex, "llm/vllm-b") == 8, 15, what="b's 3 new lines")
        time.sleep(4.5)  # two more looks: nothing read again
        assert _requests(ex, "llm/vllm-b") == 8 and _requests(ex, "llm/vllm-a") == 3
        assert ex.value("vllm_log_exporter_source_up", server="llm/vllm-b") == 1
    finally:
        b.parent.parent.chmod(0o755)
        ex.stop()


def test_more_pods_than_file_descriptors_take_turns_and_each_line_is_counted_once(tmp_path):
    """150 pods under a limit of 96 descriptors, 40 files open at once: every pod read, each line once,
    no "Too many open files"; the pods waiting for a first turn are said once."""
    import resource

    pods = tmp_path / "pods"
    paths = [pods / f"llm_vllm-{i}_uid-{i}" / "vllm" / "0.log" for i in range(150)]
    for p in paths:
        write(p, *[cri_access("stdout", j) for j in range(4)])

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96))

    ex = Exporter("--source", str(pods / "*_vllm-*" / "*" / "*.log"), "--from-start", "--max-open-files", "40")
    err_path = tmp_path / "stderr"
    _start_limited(ex, limit, err_path)
    try:
        def counts():
            status, body = http_get(ex.url + "/metrics")
            got = samples(body)
            return [value(got, "vllm_log_http_requests_total", server=f"llm/vllm-{i}") or 0 for i in range(150)]

        wait_until(lambda: counts() == [4] * 150, 60, what="every pod's 4 lines")
        for p in paths:
            write(p, *[cri_access("stdout", j) for j in range(4, 6)])
        wait_until(lambda: counts() == [6] * 150, 60, what="every pod's 2 more lines")
        import time

        time.sleep(5)  # more turns: nothing read again
        assert counts() == [6] * 150
    finally:
        ex.stop()
    err = err_path.read_text()
    assert "Too many open files" not in err and "Traceback" not in err, err[-3000:]
    said = [json.loads(x)["event"] for x in err.splitlines() if x.startswith("{")]
    assert sum(1 for e in said if e.startswith("more files than --max-open-files")) == 1


def _start_limited(ex, preexec, err_path):
    """Exporter.start with a resource limit set in the child, its log to a file (hundreds of lines
    would fill a pipe nobody reads while the test waits)."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    with open(err_path, "w") as err:
        ex.proc = subprocess.Popen([sys.executable, "-m", "exporter", "serve", *ex.args], cwd=ROOT, env=ex.env,
                                   stdout=subprocess.DEVNULL, stderr=err, text=True, preexec_fn=preexec)
    wait_until(lambda: ex._alive() and http_get(ex.url + "/healthz")[0] == 200, 20, what="exporter /healthz")


def test_turns_go_to_those_waiting_longest_and_only_files_done_with_theirs_give_them_up():
    from exporter.daemon.turns import Turn, next_turns

    files = [Turn("open-long-idle", 0.0, 1.0), Turn("open-busy", 0.0, 9.5), Turn("open-new", 9.0, 9.0),
             Turn("w-old", None, 2.0), Turn("w-new", None, 8.0), Turn("w-oldest", None, 1.0)]
    stop, start = next_turns(files, room=1, now=10.0)
    assert stop == ["open-long-idle"]  # busy (read 0.5 s ago) and new (open 1 s) keep theirs
    assert start == ["w-oldest", "w-old"]
    assert next_turns([t for t in files if t.open_since is not None], room=0, now=10.0) == ([], [])
