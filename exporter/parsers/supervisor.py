"""What the supervisor says about the vLLM process: systemd (a plain unit or a Quadlet container)
and docker compose. These lines are not vLLM's, and they are the only word on a server killed from
outside (the kernel's OOM killer sends SIGKILL and vLLM logs nothing).

systemd (``src/core/service.c`` and ``unit.c``; the journal's MESSAGE holds the ``<unit>: `` prefix,
written by ``LOG_UNIT_MESSAGE``), as the unit's log shows them:

- ``vllm.service: Main process exited, code=exited, status=1/FAILURE``; ``code=killed,
  status=9/KILL``; ``code=dumped, status=11/SEGV``. The name after the slash is systemd's for the
  exit status (``FAILURE``, ``203/EXEC``; ``n/a`` for a number it has no name for, such as 137) or the
  signal's. A clean exit is logged at debug level only, so one seen here is a failure unless it says
  ``(success)``.
- ``vllm.service: Failed with result 'exit-code'.`` (since v240; ``signal``, ``core-dump``,
  ``oom-kill``, ``timeout``, ``watchdog``, ``start-limit-hit``, ...).
- ``vllm.service: Scheduled restart job, restart counter is at 3.`` (``Restart=`` at work; a
  ``systemctl restart`` logs none).
- ``vllm.service: Start request repeated too quickly.`` (``StartLimitBurst`` reached: systemd gives up).
- ``vllm.service: A process of this unit has been killed by the OOM killer.`` (the host's memory,
  not the GPU's).

Older systemd (v219-v237) also says ``main process exited`` (lower case) and ``start request repeated
too quickly for vllm.service``; ``systemd-oomd killed N process(es) in this unit.`` is the userspace OOM
killer. Not counted: the announcements ``Service hold-off time over, scheduling restart.`` and
``Service RestartSec=... expired, scheduling restart.`` (v236+ follows each with the counter line,
which is what counts: counting both would count every restart twice; v219 has no counter line, and
its restarts go uncounted), ``Unit vllm.service entered failed state.`` (the old companion of
``Failed with result``), ``Scheduled restart job immediately on client request`` (a restart asked for).

docker compose (v2, attached ``up``): ``vllm-1 exited with code 1``, with `` (restarting)`` when a
restart policy brings it back (2.27+ starts the line with an erase-line code); compose v1 printed
``vllm_1 exited with code 1``; podman-compose ``exit code: 137`` (no container name).
Every wording here, with its source, is in tests/fixtures/real_lines/supervisor.yaml.

Events:

- ``process_exit``: ``supervisor`` (``systemd`` | ``compose``), ``unit``, ``how`` (``exited`` |
  ``killed`` | ``dumped``), ``status`` (the exit code as a string, or the signal's name: ``SIGKILL``),
  ``clean`` (systemd said success, or exit code 0).
- ``unit_result``: ``result`` (systemd's word), ``unit``.
- ``restart``: ``supervisor``, ``unit``, ``counter`` (systemd's restart counter; None for compose,
  whose ``(restarting)`` gives both events).
- ``start_limit``: ``unit``.
- ``host_oom_kill``: ``unit``.
- ``shutdown`` (exporter.parsers.lifecycle's kind, signature ``systemd stop``): systemd began stopping
  the unit: ``Stopping <Description>...`` or ``<unit>: State 'stop-sigterm' timed out. Killing.``.
"""

from __future__ import annotations

import re

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import NO_LEVEL, Parser, lazy_compile, where

# "<unit>: " in front (a unit name has no spaces); absent when a log shipper dropped it
_UNIT = r"(?:(?P<unit>[\w@:.\\-]+\.(?:service|scope|container)): )?"
_EXITED = lazy_compile(_UNIT + r"[Mm]ain process exited, code=(?P<how>exited|killed|dumped), "
                             r"status=(?P<num>\d+)/(?P<name>[A-Za-z0-9_/+-]+)(?P<rest>.*)$")
_RESULT = lazy_compile(_UNIT + r"Failed with result '(?P<result>[\w-]+)'")
_RESTART = lazy_compile(_UNIT + r"Scheduled restart job, restart counter is at (?P<n>\d+)")
_START_LIMIT = lazy_compile(_UNIT + r"[Ss]tart request repeated too quickly(?: for (?P<unit2>\S+?)\.?$)?")
_OOM_KILL = lazy_compile(_UNIT + r"(?:A process of this unit has been killed by the OOM killer"
                               r"|systemd-oomd killed \d+ process\(es\) in this unit)")
# compose v2 names containers "<project>-<service>-<n>", v1 "<project>_<service>_<n>"
# compose 2.27+ starts each status line with "\r" ESC "[K" (erase line); a copy that lost the ESC keeps "[K"
_COMPOSE_EXIT = lazy_compile(r"^(?:\[K)?(?P<unit>[A-Za-z0-9][\w.-]*) +exited with code (?P<code>-?\d+)"
                           r"(?P<restarting> \(restarting\))?\s*$")
# podman-compose: "exit code: 137" (<= 1.0.6, on stderr) or "INFO:podman_compose:exit code: 137" (1.1+ with
# --verbose); it names no container
_PODMAN_COMPOSE_EXIT = lazy_compile(r"^(?:INFO:podman_compose:)?exit code: (?P<code>-?\d+)\s*$")

# systemd's signal names (signal_to_string: "KILL", "SEGV") as the usual "SIGKILL"
_SIGNAL_NAME = lazy_compile(r"[A-Z]{2,8}\d*")
RESULTS = ("exit-code", "signal", "core-dump", "oom-kill", "timeout", "watchdog", "start-limit-hit",
           "resources", "protocol", "exec-condition", "success")


def _unit(m: re.Match) -> str | None:
    return m.group("unit")


# systemd beginning a stop of the unit (a `systemctl stop` or `restart`, a deploy): its job line "Stopping
# <Description>..." ("Stopping vllm.service - vLLM server..." with the combined status format), and the
# stop's SIGKILL when SIGTERM was not enough, "vllm.service: State 'stop-sigterm' timed out. Killing.".
# Both make what follows a stop, also when vLLM's own stop line is missing (a log level above INFO):
# otherwise the SIGKILL's or podman's 143 exit would read as a death.
_STOPPING = lazy_compile(r"^Stopping (.+)\.\.\.$")
# A bare "Stopping ...": systemd's only when it names a unit ("Stopping vllm.service...", or the combined
# status format's "Stopping vllm.service - vLLM server..."); a Description alone is systemd's only under
# its tag ("systemd[1]: Stopping vLLM server...", which the journald source also writes): programs print
# "Stopping server loop..." on their own (Mooncake's metadata server, catalogue/findings.md row 9)
_UNIT_NAMED = lazy_compile(r"[\w@:.\\-]+\.(?:service|scope|container)(?: - .*)?$")
_STOP_TIMEOUT = lazy_compile(_UNIT + r"State 'stop-sigterm' timed out\. Killing\.")


def _stop(frame: Frame) -> list[Event] | None:
    msg = frame.message
    if frame.level is not None or frame.process is not None or frame.unit not in (None, "systemd"):
        return None  # a record of vLLM's own, or another program's line
    m = _STOPPING.match(msg)
    if m is not None:
        if frame.unit != "systemd" and _UNIT_NAMED.match(m.group(1)) is None:
            return None
    elif _STOP_TIMEOUT.match(msg) is None:
        return None
    return [Event("shutdown", {"signature": "systemd stop", "message": msg[:300]})]


def _parse(frame: Frame) -> list[Event] | None:
    msg = frame.message
    if msg.startswith("Stopping ") or "State 'stop-sigterm' timed out" in msg:
        return _stop(frame)
    if "ain process exited" in msg:
        m = _EXITED.search(msg)
        if not m:
            return None
        how, num, name = m.group("how"), int(m.group("num")), m.group("name")
        if how == "exited":
            status = str(num)
        else:
            status = "SIG" + name if _SIGNAL_NAME.fullmatch(name) else str(num)
        clean = "(success)" in m.group("rest") or (how == "exited" and num == 0)
        return [Event("process_exit", {"supervisor": "systemd", "unit": _unit(m), "how": how, "status": status,
                                       "status_text": f"{num}/{name}", "clean": clean})]
    if "exit code: " in msg:
        m = _PODMAN_COMPOSE_EXIT.match(msg)
        if m:
            code = int(m.group("code"))
            return [Event("process_exit", {"supervisor": "podman-compose", "unit": None, "how": "exited",
                                           "status": str(code), "status_text": str(code), "clean": code == 0})]
        return None
    if "exited with code" in msg:
        m = _COMPOSE_EXIT.match(msg)
        if not m:
            return None
        code, unit = int(m.group("code")), m.group("unit")
        events = [Event("process_exit", {"supervisor": "compose", "unit": unit, "how": "exited", "status": str(code),
                                         "status_text": str(code), "clean": code == 0})]
        if m.group("restarting"):
            events.append(Event("restart", {"supervisor": "compose", "unit": unit, "counter": None}))
        return events
    if "Failed with result" in msg:
        m = _RESULT.search(msg)
        if m:
            return [Event("unit_result", {"unit": _unit(m), "result": m.group("result")})]
        return None
    if "Scheduled restart job" in msg:
        m = _RESTART.search(msg)
        if m:
            return [Event("restart", {"supervisor": "systemd", "unit": _unit(m), "counter": int(m.group("n"))})]
        return None
    if "tart request repeated too quickly" in msg:
        m = _START_LIMIT.search(msg)
        if m:
            return [Event("start_limit", {"unit": _unit(m) or m.group("unit2")})]
        return None
    if "killed by the OOM killer" in msg or "systemd-oomd killed" in msg:
        m = _OOM_KILL.search(msg)
        if m:
            return [Event("host_oom_kill", {"unit": _unit(m)})]
    return None


def exit_words(fields: dict) -> str:
    """A process_exit event in words: "systemd: main process killed, status 9/KILL"."""
    return (f"{fields.get('supervisor', 'supervisor')}: main process {fields.get('how', 'exited')}, "
            f"status {fields.get('status_text') or fields.get('status')}")


# Where they are printed (the trust boundary): by the supervisor itself, never inside a record of vLLM's
# (no process tag, no vLLM header, no level), the words first (after systemd's "<unit>: ").
PARSER = Parser("supervisor", ("Stopping ", "State 'stop-sigterm' timed out", "ain process exited", "exited with code", "exit code: ", "Failed with result",
                               "Scheduled restart job", "tart request repeated too quickly", "killed by the OOM killer",
                               "systemd-oomd killed"), _parse,
                where((NO_LEVEL,), untagged=True,
                      start=r"(?:[\w@:.\\-]+\.(?:service|scope|container): )?(?:[Mm]ain process exited|Failed with result|"
                            r"Scheduled restart job|[Ss]tart request repeated too quickly|A process of this unit has been "
                            r"killed|systemd-oomd killed|State 'stop-sigterm' timed out)|Stopping |(?:\[K)?"
                            r"[A-Za-z0-9][\w.-]* +exited with code|(?:INFO:podman_compose:)?exit code: "))
