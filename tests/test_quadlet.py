"""The Quadlet units through the real Quadlet generator, and the services it makes through
`systemd-analyze verify`.

Debian 12's podman (4.3) has no Quadlet; Debian trixie's podman package holds the generator, which
runs here (it needs only libc). The test fetches that .deb with apt-get and a temporary sources
list (the system's apt state is not touched), unpacks it, and caches the binary next to the test
images. Skipped, saying why, where the Debian mirror is unreachable.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT

CACHE = Path(os.environ.get("VLLM_LOG_EXPORTER_IMAGE_CACHE", "/var/tmp/vllm-log-exporter-test-images"))
UNITS = ROOT / "deploy" / "quadlet"


@pytest.fixture(scope="module")
def quadlet(tmp_path_factory):
    binary = CACHE / "quadlet" / "usr" / "libexec" / "podman" / "quadlet"
    if binary.exists():
        return binary
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        pytest.skip("apt-get/dpkg-deb not here: cannot fetch the Quadlet generator")
    work = tmp_path_factory.mktemp("apt")
    (work / "lists" / "partial").mkdir(parents=True)
    (work / "sources.list").write_text("deb http://deb.debian.org/debian trixie main\n")
    opts = ["-o", f"Dir::Etc::sourcelist={work / 'sources.list'}", "-o", "Dir::Etc::sourceparts=-",
            "-o", f"Dir::State::Lists={work / 'lists'}", "-o", "APT::Get::List-Cleanup=0", "-qq"]
    r = subprocess.run(["apt-get", *opts, "update"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.skip(f"Debian mirror unreachable: {r.stderr.strip()[-200:]}")
    r = subprocess.run(["apt-get", *opts, "download", "podman"], cwd=work, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (deb,) = work.glob("podman_*.deb")
    target = CACHE / "quadlet.part"
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True, timeout=120)
    os.replace(target, CACHE / "quadlet")
    return binary


def generate(quadlet: Path, out: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(quadlet), *flags, str(out)], env={**os.environ, "QUADLET_UNIT_DIRS": str(UNITS)},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode", ["system", "user"])
def test_the_generator_makes_both_services_as_the_units_say(quadlet, tmp_path, mode):
    out = tmp_path / "generated"
    out.mkdir()
    r = generate(quadlet, out, *(["-user"] if mode == "user" else []))
    assert r.returncode == 0, r.stderr
    services = sorted(p.name for p in out.glob("*.service"))
    assert services == ["vllm-log-exporter-journald.service", "vllm-log-exporter.service"], r.stderr
    for name in services:
        text = (out / name).read_text()
        start = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
        for flag in ("--cap-drop all", "--read-only", "--security-opt=no-new-privileges", "--security-opt label=disable",
                     "--user 0", "--network host", "--init",
                     '--health-cmd "vllm-log-exporter healthcheck --web.listen-address=127.0.0.1:10825"'):
            assert flag in start, (name, flag, start)
        assert "localhost/vllm-log-exporter:latest --web.listen-address=127.0.0.1:10825" in start
    journald = (out / "vllm-log-exporter-journald.service").read_text()
    assert "-v /var/log/journal:/var/log/journal:ro" in journald and "RequiresMountsFor=/var/log/journal" in journald


def test_systemd_analyze_verifies_the_generated_services(quadlet, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed")
    out = tmp_path / "generated"
    out.mkdir()
    assert generate(quadlet, out).returncode == 0
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", *map(str, sorted(out.glob("*.service")))],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vllm-log-exporter" not in r.stderr, r.stderr  # nothing said about our units


def test_a_unit_with_a_key_the_generator_does_not_know_is_refused(quadlet, tmp_path):
    """So the tests above would catch a misspelt key."""
    units = tmp_path / "units"
    units.mkdir()
    text = (UNITS / "vllm-log-exporter.container").read_text().replace("ReadOnly=true", "ReadOnyl=true")
    (units / "broken.container").write_text(text)
    out = tmp_path / "generated"
    out.mkdir()
    r = subprocess.run([str(quadlet), str(out)], env={**os.environ, "QUADLET_UNIT_DIRS": str(units)},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and not (out / "broken.service").exists()
    dry = subprocess.run([str(quadlet), "-dryrun"], env={**os.environ, "QUADLET_UNIT_DIRS": str(units)},
                         capture_output=True, text=True, timeout=60)
    assert "unsupported key 'ReadOnyl'" in dry.stderr, dry.stderr


# --- the units run, and restarted -----------------------------------------------------------------

def unit_commands(service_text: str, subs: dict[str, str], unit: str, run_dir: Path,
                  name: str) -> dict[str, list[list[str]]]:
    """The generated service's ExecStart/ExecStop/ExecStopPost as argument lists, as systemd would run
    them here: specifiers expanded (%t, %N, %n); ``subs`` put the test's paths, image and port in,
    ``name`` is the container's.
    Two flags are left out, each needing systemd itself: --cgroups=split (the unit's delegated
    cgroup) and --sdnotify=conmon (systemd's NOTIFY_SOCKET)."""
    import shlex

    out: dict[str, list[list[str]]] = {"ExecStart": [], "ExecStop": [], "ExecStopPost": []}
    for line in service_text.splitlines():
        key, _, value = line.partition("=")
        if key not in out:
            continue
        value = value.lstrip("-")  # "-": failure ignored
        value = value.replace("%t", str(run_dir)).replace("%N", unit).replace("%n", f"{unit}.service")
        args = [a for a in shlex.split(value) if a not in ("--cgroups=split", "--sdnotify=conmon")]
        for old, new in subs.items():
            args = [a.replace(old, new) for a in args]
        if "--name" in args:
            args[args.index("--name") + 1] = name
        out[key].append(args)
    return out


@pytest.mark.parametrize("unit", ["vllm-log-exporter", "vllm-log-exporter-journald"])
def test_the_unit_keeps_its_place_across_a_restart(quadlet, images, tmp_path, unit):
    """The service the generator makes of each unit, run with podman as systemd would run it
    (ExecStart; a restart is ExecStop, ExecStopPost, ExecStart), while the vLLM log keeps being
    written: every line counted once (tests/restarts.py). Debian 12's podman 4.3 runs them, as it
    runs the units' flags; the image is the one tests/test_compose.py builds from the Containerfile."""
    from tests.helpers import free_port, http_get, value, wait_until
    from tests.journal import have_journal_tools
    from tests.restarts import ContainerFeed, JournalFeed, restart_mid_stream
    from tests.podman import EXPORTER, SMOKE, _run

    env, _ = images
    out = tmp_path / "generated"
    out.mkdir()
    assert generate(quadlet, out).returncode == 0
    port = free_port()
    name, volume = f"vle-t-unit-{port}", f"vle-t-state-{port}"
    subs = {"localhost/vllm-log-exporter:latest": EXPORTER, "127.0.0.1:10825": f"127.0.0.1:{port}",
            "vllm-log-exporter-container-state:": f"{volume}:",
            "vllm-log-exporter-state:": f"{volume}:"}
    if unit == "vllm-log-exporter":
        feed = ContainerFeed(tmp_path / "vllm", env, SMOKE, f"vle-t-grandpa-{port}")
        subs.update({"/run/podman/podman.sock:/run": f"{feed.sock}:/run", "container:vllm": f"container:{feed.name}"})
    else:
        if not have_journal_tools():
            pytest.skip("needs systemd-journal-remote")
        feed = JournalFeed(tmp_path / "journal")
        subs["/var/log/journal:/var/log/journal:ro"] = f"{feed.journal.dir}:/var/log/journal:ro"
        subs["journald:vllm"] = "journald:grandpa"  # the unit tests/restarts.py's journal holds
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cmds = unit_commands((out / f"{unit}.service").read_text(), subs, unit, run_dir, name)
    text = " ".join(" ".join(c) for c in cmds["ExecStart"])
    try:
        assert f"{volume}:/var/lib/vllm-log-exporter" in text and "--state-file=/var/lib/vllm-log-exporter/state.json" in text
        assert "-v /run/podman/podman.sock:" not in text and "-v /var/log/journal:" not in text  # host paths: the test's
    except AssertionError:
        feed.close()  # its podman API service and container must not outlive the test
        raise

    def start():
        for c in cmds["ExecStart"]:
            _run(c, env, timeout=120)

    def stop():
        for c in cmds["ExecStop"] + cmds["ExecStopPost"]:
            _run(c, env, timeout=120, check=False)
        # podman >= 4.4 deletes --cidfile's file with the container (podman issue 16387), which the
        # units' podman (>= 4.5) does and this machine's 4.3 does not
        (run_dir / f"{unit}.cid").unlink(missing_ok=True)

    url = f"http://127.0.0.1:{port}/metrics"

    def counted():
        return value(http_get(url, timeout=2)[1], "vllm_log_http_requests_total", server="vllm")

    try:
        start()
        wait_until(lambda: value(http_get(url, timeout=2)[1], "vllm_log_exporter_source_up", server="vllm") == 1,
                   60, what=f"{unit} following its vLLM")
        restart_mid_stream(feed, counted, stop, start)
    except AssertionError as e:
        logs = _run(["podman", "logs", "--tail", "40", name], env, check=False)
        raise AssertionError(f"{e}\nexporter's log:\n{logs.stdout[-3000:]}{logs.stderr[-3000:]}") from e
    finally:
        stop()
        _run(["podman", "volume", "rm", "-f", volume], env, check=False)
        feed.close()
