"""The container source against a real ``podman system service`` (podman's Docker-compatible API) and
real containers: every line exactly once through restarts, stops, re-creation under the same name,
an API service that dies, a container that appears late, and a TTY container.

Each container runs a script that prints numbered vLLM access lines, odd numbers to stderr, keeping
its counter in a mounted directory, so a restarted or re-created container continues the numbering
and "exactly once" is checkable line by line.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest

from exporter.sources.base import Backoff
from exporter.sources.container import ContainerSource
from tests.helpers import wait_until
from tests.journal import numbers
from tests.podman import _busybox_rootfs, _import, podman_environment
from tests.test_source_file import Follow

TAG = f"localhost/vle-test-logger:{uuid.uuid4().hex[:8]}"  # our own name, removed at the end

SCRIPT = r'''#!/bin/sh
# COUNT numbered lines per start, odd ones on stderr; the counter survives restarts in /state.
trap 'exit 0' TERM
n=$(cat /state/n 2>/dev/null || echo 0)
end=$((n + ${COUNT:-20}))
while [ "$n" -lt "$end" ]; do
  line="(APIServer pid=1) INFO:     127.0.0.1:$n - \"GET /v1/models HTTP/1.1\" 200 OK"
  if [ $((n % 2)) = 0 ]; then echo "$line"; else echo "$line" >&2; fi
  n=$((n + 1))
  echo "$n" > /state/n
  [ -n "$DELAY" ] && sleep "$DELAY"
done
while :; do sleep 1 & wait $!; done
'''


class Podman:
    def __init__(self, tmp):
        self.tmp = tmp
        self.env = podman_environment(tmp)
        self.sock = tmp / "podman.sock"
        self.service = None
        self.names: list[str] = []

    def run(self, *args, check=True, timeout=120):
        r = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {r.stderr}")
        return r

    def start_service(self):
        self.service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{self.sock}"],
                                        env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: self.sock.exists(), 20, 0.05, what="podman API socket")

    def kill_service(self):
        if self.service and self.service.poll() is None:
            self.service.kill()
            self.service.wait(10)
        self.sock.unlink(missing_ok=True)

    def container(self, name, count=20, delay="", tty=False, state=None):
        if name not in self.names:
            self.names.append(name)
        state = state or (self.tmp / f"state-{name}")
        state.mkdir(exist_ok=True)
        args = ["run", "-d", "--name", name, "--network=none", "-v", f"{state}:/state",
                "-v", f"{self.tmp / 'logger.sh'}:/logger.sh:ro", "-e", f"COUNT={count}", "-e", f"DELAY={delay}"]
        if tty:
            args.append("-t")
        return self.run(*args, TAG, "/bin/sh", "/logger.sh").stdout.strip()

    def printed(self, name) -> int:
        # the script rewrites the file in place: an empty read is a write under way, and a missing
        # file a container whose script has not started yet (`podman run -d` returns before it does)
        for _ in range(500):
            try:
                text = (self.tmp / f"state-{name}" / "n").read_text().strip()
            except FileNotFoundError:
                text = ""
            if text:
                return int(text)
            time.sleep(0.01)
        raise AssertionError(f"{name}: counter file missing or empty for 5 s")


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    if not shutil.which("podman"):
        pytest.skip("podman not installed")
    tmp = tmp_path_factory.mktemp("podman-api")
    p = Podman(tmp)
    (tmp / "logger.sh").write_text(SCRIPT)
    _import(_busybox_rootfs(tmp), TAG, 'CMD ["/bin/sh"]', p.env)
    r = p.run("run", "--rm", "--network=none", TAG, "/bin/true", check=False)
    if r.returncode != 0:
        p.run("rmi", "-f", TAG, check=False)
        pytest.skip(f"containers cannot run here: {r.stderr.strip()[-300:]}")
    p.start_service()
    yield p
    for name in p.names:
        p.run("rm", "-f", "-t", "0", name, check=False)
    p.kill_service()
    p.run("rmi", "-f", TAG, check=False)


def source(podman, name, **kw):
    return ContainerSource("gp", name, socket=str(podman.sock), backoff=Backoff(0.1, 0.5), **kw)


async def until(cond, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def exactly(fw, podman, name, timeout=30, total=None):
    """Wait until every line the container printed arrived; then nothing more may come. ``total``:
    how many it prints in all by now, waited for first (else a check can pass while it still prints,
    and the lines it prints after it have 0.5 s to arrive)."""
    if total is not None:
        await until(lambda: podman.printed(name) == total, timeout, what=f"{name} to print {total} lines")
    await until(lambda: len(numbers(fw.lines)) >= podman.printed(name), timeout,
                what=f"{podman.printed(name)} lines of {name} (have {len(numbers(fw.lines))})")
    await asyncio.sleep(0.5)
    assert sorted(numbers(fw.lines)) == list(range(podman.printed(name))), numbers(fw.lines)


async def test_restart_stop_start_and_no_reconnect_loop_while_stopped(podman):
    name = "vle-t-restart"
    podman.container(name, count=30, delay="0.01")
    async with Follow(source(podman, name, from_start=True)) as fw:
        await exactly(fw, podman, name, total=30)
        podman.run("restart", name)
        await exactly(fw, podman, name, total=60)
        podman.run("restart", "-t", "1", name)
        await exactly(fw, podman, name, total=90)
        assert podman.printed(name) == 90
        podman.run("stop", "-t", "1", name)
        await until(lambda: fw.status.ups and fw.status.ups[-1] is False, 10, what="source down")
        ups_before = len(fw.status.ups)
        await asyncio.sleep(4)
        # no flapping: while the container is stopped the source stays down, reporting no up
        assert True not in fw.status.ups[ups_before:], fw.status.ups
        podman.run("start", name)
        await until(lambda: fw.status.ups[-1] is True, 20, what="source up again")
        await exactly(fw, podman, name, total=120)
    assert podman.printed(name) == 120


async def test_removed_and_recreated_under_the_same_name_within_a_second(podman):
    name = "vle-t-recreate"
    podman.container(name, count=50)
    async with Follow(source(podman, name, from_start=True)) as fw:
        await exactly(fw, podman, name)
        for _ in range(3):
            podman.run("rm", "-f", "-t", "0", name)
            podman.container(name, count=50)  # the same second as the old one's last lines
            await exactly(fw, podman, name)
    assert podman.printed(name) == 200


async def test_api_service_killed_and_started_again(podman):
    name = "vle-t-apikill"
    podman.container(name, count=400, delay="0.01")
    async with Follow(source(podman, name, from_start=True)) as fw:
        await until(lambda: len(fw.lines) >= 20, 20, what="first lines")
        podman.kill_service()
        await asyncio.sleep(1.5)  # the container keeps printing meanwhile
        assert fw.status.ups[-1] is False
        podman.start_service()
        await until(lambda: podman.printed(name) >= 400, 60, what="the container to finish")
        await exactly(fw, podman, name)
        assert fw.status.ups[-1] is True and fw.status.restarts >= 1


async def test_container_created_after_the_source_started(podman):
    name = "vle-t-late"
    async with Follow(source(podman, name)) as fw:  # starting at the end, as the daemon does by default
        await asyncio.sleep(2)  # the source has been retrying meanwhile
        assert fw.status.ups and not any(fw.status.ups)
        podman.container(name, count=9)  # prints everything at once, before the source reconnects
        await exactly(fw, podman, name)


async def test_a_quiet_running_container_is_up_while_it_logs_nothing(podman):
    """podman 4.3 answers a followed log only once a line passes `since`: a running vLLM that logs
    nothing after the exporter started (idle) must not be reported down (VllmLogSourceDown would page
    for an idle server); its next line is read."""
    name = "vle-t-quiet"
    podman.container(name, count=3)
    wait_until(lambda: podman.printed(name) == 3, 20, what="3 printed")
    await asyncio.sleep(1.1)  # `since` is whole seconds: its lines are all before the source starts
    # a short request timeout: the 1.5 s the logs request waits for headers pass within the test
    async with Follow(source(podman, name, request_timeout=1.0)) as fw:
        await until(lambda: fw.status.ups, 10, what="the source's state")
        await asyncio.sleep(3)  # twice past the wait for headers
        assert fw.status.ups and False not in fw.status.ups, fw.status.ups
        line = '(APIServer pid=1) INFO:     127.0.0.1:3 - "GET /v1/models HTTP/1.1" 200 OK'
        podman.run("exec", name, "sh", "-c", f"echo '{line}' > /proc/1/fd/1")
        await until(lambda: numbers(fw.lines) == [3], 20, what="its next line")
        assert fw.status.ups[-1] is True


async def test_tty_container(podman):
    name = "vle-t-tty"
    podman.container(name, count=40, tty=True)
    async with Follow(source(podman, name, from_start=True)) as fw:
        await exactly(fw, podman, name)
        podman.run("restart", "-t", "1", name)
        await exactly(fw, podman, name)
    assert not any("\r" in ln for ln in fw.lines)


async def test_checkpoint_resumes_after_an_exporter_restart(podman):
    name = "vle-t-resume"
    podman.container(name, count=30)
    first = source(podman, name, from_start=True)
    async with Follow(first) as fw:
        await exactly(fw, podman, name)
    cp = first.checkpoint()
    podman.run("restart", "-t", "1", name)  # 30 more while "the exporter" is down
    wait_until(lambda: podman.printed(name) == 60, 20, what="second run printed")
    async with Follow(source(podman, name, resume=cp)) as fw:
        await until(lambda: len(fw.lines) >= 30, 20, what="the lines written while down")
        await asyncio.sleep(0.5)
    assert sorted(numbers(fw.lines)) == list(range(30, 60))


def test_exporter_with_state_file_resumes_a_container_exactly(podman, tmp_path):
    """The real exporter, stopped and started again with a state file while the container prints."""
    from tests.helpers import Exporter

    name = "vle-t-daemon"
    podman.container(name, count=30)
    wait_until(lambda: podman.printed(name) == 30, 20, what="first 30 printed")
    state = tmp_path / "state.json"
    args = ("--source", f"gp=container:{name}", "--container-socket", str(podman.sock), "--state-file", str(state),
            "--from-start")
    with Exporter(*args) as ex:
        wait_until(lambda: ex.value("vllm_log_http_requests_total", server="gp") == 30, 30, what="30 counted")
        wait_until(lambda: state.exists() and '"seen"' in state.read_text(), 10, what="checkpoint saved")
    podman.run("restart", "-t", "1", name)  # 30 more while the exporter is down
    wait_until(lambda: podman.printed(name) == 60, 20, what="30 more printed")
    with Exporter(*args) as ex:
        wait_until(lambda: (ex.value("vllm_log_http_requests_total", server="gp") or 0) >= 30, 30, what="30 new")
        time.sleep(1)
        assert ex.value("vllm_log_http_requests_total", server="gp") == 30
        assert ex.value("vllm_log_exporter_source_up", server="gp") == 1
