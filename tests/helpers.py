"""Shared test helpers: free ports, bounded waits, scraping, starting real daemons and Prometheus."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent

# Waits are ceilings, not budgets: a wait returns the moment its condition holds, and its timeout only
# says when to give up on something that is not coming. Each is written as what an idle machine needs;
# a loaded one (two cores shared by several test runs, a real vLLM compiling beside them) can need
# several times that, so every ceiling is stretched by CEILING_SCALE (VLE_TEST_CEILING_SCALE). How fast
# things are is measured by bench/ and written in docs/benchmarks.md, never asserted by a test.
CEILING_SCALE = float(os.environ.get("VLE_TEST_CEILING_SCALE", "6"))


def ceiling(seconds: float) -> float:
    """A wait's idle-machine timeout, stretched for a loaded machine."""
    return seconds * CEILING_SCALE


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def terminate(proc: subprocess.Popen | None) -> None:
    """Stop a child politely, then firmly; bounded in time."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# The live runs whose assertions depend on vLLM's own timing (its stats loop's windows, its latencies) take the
# machine alone: on 2 cores, a third vLLM server starting beside them starved the API server's event loop (a
# first stats window of ~8 s where the log shows nothing longer than 2 s, 4 % of the prompt tokens lost with
# it). Every other live run may overlap them. One lock for every checkout on the machine.
ALONE_LOCK = Path("/tmp/vllm-log-exporter-live-alone.lock")


@contextlib.contextmanager
def alone(what: str, timeout: float = 1200.0):
    """Hold ALONE_LOCK for ``what``: waits (bounded) while another timing-sensitive live run holds it."""
    import fcntl

    with open(ALONE_LOCK, "a") as f:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{what}: {ALONE_LOCK} still held by another live run after {timeout:.0f} s")
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def wait_until(fn, timeout: float = 15.0, interval: float = 0.1, what: str = "condition"):
    """Call ``fn`` until it returns a truthy value; bounded in time (and so in count): ``timeout`` is
    what an idle machine needs, stretched by CEILING_SCALE."""
    timeout = ceiling(timeout)
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last_exc = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_exc!r})" if last_exc else ""))


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    timeout = ceiling(timeout)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(text_or_samples, name: str, **labels) -> float | None:
    d = samples(text_or_samples) if isinstance(text_or_samples, str) else text_or_samples
    want = set(labels.items())
    hits = [v for (n, ls), v in d.items() if n == name and want <= set(ls)]
    if not hits:
        return None
    return sum(hits)


def families_without_a_sample(exposition: str) -> set[str]:
    """Families an exposition declares (# TYPE) and gives no sample, the process's own left out."""
    families, sampled, current = set(), set(), None
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            current = line.split()[2]
            families.add(current)
        elif line and not line.startswith("#"):
            sampled.add(current)
    return {f for f in families - sampled if not f.startswith(("process_", "python_"))}


def demo_leaves_empty(expr: str) -> bool:
    """A dashboard query that reads only families docs/demo.md's 'What the demo does not show' names: its
    "No data" on the demo is said, with why."""
    names = {re.sub(r"_(bucket|count|sum)$", "", n) for n in re.findall(r"\b(vllm_log_\w+)", expr)}
    # (the stack tests read a pod's log too: its pod info is there)
    return bool(names) and names <= readme_demo_leaves_empty() - {"vllm_log_kubernetes_pod_info"}


def readme_demo_leaves_empty() -> set[str]:
    """The families docs/demo.md's 'What the demo does not show' names (each with why)."""
    readme = (ROOT / "docs" / "demo.md").read_text(encoding="utf-8")
    said = readme[readme.index("**What the demo does not show**"):]
    end = said.find("\n\n", said.index("\n- "))
    said = said[:end if end >= 0 else None]
    return set(re.findall(r"`(vllm_log_\w+)`", said)) - {"vllm_log_errors_total"}


class Exporter:
    """The real exporter as a subprocess on a loopback port."""

    def __init__(self, *args: str, port: int | None = None, env: dict | None = None, cwd=None,
                 wrapper: tuple[str, ...] = ()):
        self.wrapper = list(wrapper)  # e.g. setpriv, to run it with fewer privileges
        self.port = port or free_port()
        self.args = ["--web.listen-address", f"127.0.0.1:{self.port}", "--log.format", "json", *args]
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Exporter":
        self.proc = subprocess.Popen([*self.wrapper, sys.executable, "-m", "exporter", "serve", *self.args], cwd=self.cwd or ROOT,
                                     env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: self._alive() and http_get(self.url + "/healthz")[0] == 200, 20, what="exporter /healthz")
        return self

    def _alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"exporter exited {self.proc.returncode}: {self.proc.stderr.read()}")
        return True

    def metrics(self) -> dict:
        status, body = http_get(self.url + "/metrics")
        assert status == 200
        return samples(body)

    def value(self, name: str, **labels):
        return value(self.metrics(), name, **labels)

    def stop(self) -> str:
        terminate(self.proc)
        return self.proc.stderr.read() if self.proc and self.proc.stderr else ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def have(binary: str) -> bool:
    return shutil.which(binary) is not None


class Prometheus:
    """A real Prometheus on loopback with its own temp storage."""

    def __init__(self, tmp: Path, config: dict | str, rules: list[Path] | None = None, extra_args: list[str] | None = None):
        self.tmp = tmp
        self.port = free_port()
        self.config_path = tmp / "prometheus.yml"
        text = config if isinstance(config, str) else json.dumps(config)
        self.config_path.write_text(text)
        self.extra_args = extra_args or []
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Prometheus":
        self.log = open(self.tmp / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.config_path}", f"--storage.tsdb.path={self.tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle",
             "--rules.alert.resend-delay=1s", *self.extra_args],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        wait_until(lambda: self.proc.poll() is None and http_get(self.url + "/-/ready")[0] == 200, 20, what="prometheus ready")
        return self

    def query(self, expr: str) -> list[dict]:
        status, body = http_get(self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        data = json.loads(body)
        assert status == 200 and data["status"] == "success", (expr, body)
        return data["data"]["result"]

    def api(self, path: str):
        status, body = http_get(self.url + path)
        assert status == 200, body
        return json.loads(body)["data"]

    def stop(self) -> None:
        terminate(self.proc)
        if getattr(self, "log", None):
            self.log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def dashboard_queries(root: Path = ROOT) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and query variable of the rendered dashboards."""
    import re

    out = []
    for path in sorted((root / "dashboards").glob("*.json")):
        d = json.loads(path.read_text())
        out += [(f"{path.name}: {p['title']}", t["expr"]) for p in d["panels"] for t in p.get("targets", [])]
        for v in d["templating"]["list"]:
            if v["type"] == "query":
                q = v["query"]["query"]
                m = re.fullmatch(r"label_values\((.*), *(\w+)\)", q) or re.fullmatch(r"query_result\((.*)\)()", q)
                out.append((f"{path.name}: variable {v['name']}", m.group(1)))
    return out


def grafana_substitute(expr: str, **variables: str) -> str:
    """A dashboard query as Grafana sends it: intervals filled in, variables as given or `.*` (All)."""
    expr = expr.replace("$__rate_interval", "1m").replace("$__range", "1h").replace("$__interval", "15s")
    for name in ("cluster", "namespace", "vllm_job", "job", "host", "instance", "server", "engine"):
        expr = expr.replace(f"${name}", variables.get(name, ".*"))
    return expr


class MemoryCgroup:
    """A real cgroup v1 memory controller folder with a limit (this machine's; see
    /work/shared/machine-notes.md section 10): ``wrap(cmd)`` runs a command inside it (the shell
    joins the group before exec'ing, so nothing runs outside it); ``peak`` is the group's
    memory.max_usage_in_bytes (RSS and page cache), ``oom_kills`` how often its limit killed.
    Removed on exit. ``available()`` says whether this host has one we may write."""

    ROOT = Path("/sys/fs/cgroup/memory")

    def __init__(self, limit_bytes: int, name: str | None = None):
        self.limit = limit_bytes
        self.path = self.ROOT / (name or f"vle-test-{os.getpid()}-{time.monotonic_ns()}")

    @classmethod
    def available(cls) -> bool:
        return (cls.ROOT / "memory.limit_in_bytes").exists() and os.access(cls.ROOT, os.W_OK)

    def __enter__(self) -> "MemoryCgroup":
        self.path.mkdir()
        (self.path / "memory.limit_in_bytes").write_text(str(self.limit))
        return self

    @property
    def prefix(self) -> tuple[str, ...]:
        """What runs a command inside the group when put before it (Exporter's ``wrapper``)."""
        return ("sh", "-c", f'echo $$ > {self.path}/cgroup.procs && exec "$@"', "sh")

    def wrap(self, cmd: list[str]) -> list[str]:
        return [*self.prefix, *cmd]

    @property
    def peak(self) -> int:
        return int((self.path / "memory.max_usage_in_bytes").read_text())

    @property
    def oom_kills(self) -> int:
        for line in (self.path / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def __exit__(self, *exc) -> None:
        for _ in range(50):  # its processes have exited; the kernel may take a moment to let go
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def peak_rss_bytes(pid: int) -> int:
    """A running process's own peak resident set (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0
