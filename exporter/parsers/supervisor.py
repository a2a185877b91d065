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

docker compose (v2, attached ``up``): ``vllm-1 exited with code 1``, with `` (restarting)`` when a
restart policy brings it back; compose v1 printed ``vllm_1 exited with code 1``.

Events:

- ``process_exit``: ``supervisor`` (``systemd`` | ``compose``), ``unit``, ``how`` (``exited`` |
  ``killed`` | ``dumped``), ``status`` (the exit code as a string, or the signal's name: ``SIGKILL``),
  ``clean`` (systemd said success, or exit code 0).
- ``unit_result``: ``result`` (systemd's word), ``unit``.
- ``restart``: ``supervisor``, ``unit``, ``counter`` (systemd's restart counter; None for compose,
  whose ``(restarting)`` gives both events).
- ``start_limit``: ``unit``.
- ``host_oom_kill``: ``unit``.
"""

from __future__ import annotations

import re

from exporter.events import Event
from exporter.framing import Frame
from exporter.parsers.base import Parser

# "<unit>: " in front (a unit name has no spaces); absent when a log shipper dropped it
_UNIT = r"(?:(?P<unit>[\w@:.\\-]+\.(?:service|scope|container)): )?"
_EXITED = re.compile(_UNIT + r"Main process exited, code=(?P<how>exited|killed|dumped), "
                             r"status=(?P<num>\d+)/(?P<name>[A-Za-z0-9_/+-]+)(?P<rest>.*)$")
_RESULT = re.compile(_UNIT + r"Failed with result '(?P<result>[\w-]+)'")
_RESTART = re.compile(_UNIT + r"Scheduled restart job, restart counter is at (?P<n>\d+)")
_START_LIMIT = re.compile(_UNIT + r"Start request repeated too quickly")
_OOM_KILL = re.compile(_UNIT + r"A process of this unit has been killed by the OOM killer")
# compose v2 names containers "<project>-<service>-<n>", v1 "<project>_<service>_<n>"
_COMPOSE_EXIT = re.compile(r"^(?P<unit>[A-Za-z0-9][\w.-]*) +exited with code (?P<code>\d+)(?P<restarting> \(restarting\))?\s*$")

# systemd's signal names (signal_to_string: "KILL", "SEGV") as the usual "SIGKILL"
_SIGNAL_NAME = re.compile(r"[A-Z]{2,8}\d*")
RESULTS = ("exit-code", "signal", "core-dump", "oom-kill", "timeout", "watchdog", "start-limit-hit",
           "resources", "protocol", "exec-condition", "success")


def _unit(m: re.Match) -> str | None:
    return m.group("unit")


def _parse(frame: Frame) -> list[Event] | None:
    msg = frame.message
    if "Main process exited" in msg:
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
    if "Start request repeated too quickly" in msg:
        m = _START_LIMIT.search(msg)
        return [Event("start_limit", {"unit": _unit(m) if m else None})]
    if "killed by the OOM killer" in msg:
        m = _OOM_KILL.search(msg)
        if m:
            return [Event("host_oom_kill", {"unit": _unit(m)})]
    return None


PARSER = Parser("supervisor", ("Main process exited", "exited with code", "Failed with result", "Scheduled restart job",
                               "Start request repeated too quickly", "killed by the OOM killer"), _parse)
