"""What the tools a vLLM log passes through put around each line, as each tool formats it (the source of
each is named beside it; docs/wrappers.md lists them for users). Used by tests/test_wrappers.py, which
puts fixture lines under every one of them, alone, nested and coloured.

Each wrapper is ``name -> (wrap, kind)``: ``wrap(line)`` is the line as that tool prints it; ``kind``:

- NAMED: the exporter reads the wrapper by its own grammar, so any line under it is read as the bare line
  is, even one with no vLLM header (a supervisor's, a bare exception line);
- UNIT: the same, and the wrapper names the program that printed the line (journald's tag, compose's
  service, kubectl's container): a systemd line under it is that program's, not systemd's, so only lines
  with vLLM's record start are read alike;
- FOUND: found because vLLM's record start (its process tag or header) stands after it: only lines that
  have one are read under it;
- PROCESS: a process's prefix (Ray's), put only on what a process printed itself (no outer wrapper).
"""

from __future__ import annotations

import json

STAMP = "2026-12-05T10:00:00.123456789Z"
NAMED, UNIT, FOUND, PROCESS = "named", "unit", "found", "process"


def _json(**rec) -> str:
    return json.dumps(rec, ensure_ascii=False)


WRAPPERS = {
    # journalctl (systemd 252, run here: tests/test_wrappers.py reads real journal files with each mode)
    "journalctl short": (lambda l: "Dec 05 10:00:00 gpu1 vllm[100]: " + l, UNIT),
    "journalctl short-precise": (lambda l: "Dec 05 10:00:00.123456 gpu1 vllm[100]: " + l, UNIT),
    "journalctl short-iso": (lambda l: "2026-12-05T10:00:00+0000 gpu1 vllm[100]: " + l, UNIT),
    "journalctl short-iso-precise": (lambda l: "2026-12-05T10:00:00.123456+0000 gpu1 vllm[100]: " + l, UNIT),
    "journalctl short-full": (lambda l: "Sat 2026-12-05 10:00:00 UTC gpu1 vllm[100]: " + l, UNIT),
    "journalctl with-unit": (lambda l: "Sat 2026-12-05 10:00:00 UTC gpu1 vllm.service[100]: " + l, UNIT),
    "journalctl short-unix": (lambda l: "1796464800.123456 gpu1 vllm[100]: " + l, UNIT),
    "journalctl short-monotonic": (lambda l: "[ 5123.456789] gpu1 vllm[100]: " + l, UNIT),
    "journalctl json": (lambda l: _json(MESSAGE=l, __REALTIME_TIMESTAMP="1796464800123456", _PID="100",
                                        SYSLOG_IDENTIFIER="vllm", _HOSTNAME="gpu1"), UNIT),
    # rsyslog's file output with RSYSLOG_FileFormat (a dated stamp with a zone, the host, the tag)
    "rsyslog file format": (lambda l: "2026-12-05T10:00:00.123456+00:00 gpu1 vllm[100]: " + l, UNIT),
    # podman logs -t, docker logs -t, kubectl logs --timestamps: RFC 3339 with nanoseconds
    "logs --timestamps": (lambda l: STAMP + " " + l, NAMED),
    # Kubernetes' CRI log files (kubelet, containerd, CRI-O): stamp, stream, P|F
    "CRI file": (lambda l: STAMP + " stderr F " + l, NAMED),
    # docker's json-file log driver (moby daemon/logger/jsonfilelog)
    "docker json-file": (lambda l: _json(log=l + "\n", stream="stderr", time=STAMP), NAMED),
    # docker compose v2 ("service-N  | ", padded to the longest name) and v1 ("service_N  | ")
    "docker compose": (lambda l: "vllm-1      | " + l, UNIT),
    "docker compose v1": (lambda l: "vllm_1  | " + l, UNIT),
    # podman-compose 1.x (podman_compose.py: log_formatter "[service]" padded, then "|")
    "podman-compose": (lambda l: "[vllm]      | " + l, UNIT),
    # kubectl logs --prefix, and with --timestamps
    "kubectl --prefix": (lambda l: "[pod/vllm-7d9c5-x2/vllm] " + l, UNIT),
    "kubectl --prefix --timestamps": (lambda l: "[pod/vllm-7d9c5-x2/vllm] " + STAMP + " " + l, UNIT),
    # a collector's service tag, a CI runner's stamp, a viewer's stamp and bar, Cloud Logging's export
    "collector [service]:": (lambda l: "[vllm]: " + l, UNIT),
    "Buildkite stamp": (lambda l: "[2026-12-05T10:00:00Z] " + l, NAMED),
    "viewer stamp and bar": (lambda l: "2026-12-05 10:00:00.123 | " + l, NAMED),
    "Cloud Logging export": (lambda l: "INFO 2026-12-05T10:00:00.123456Z [resource.labels.containerName: vllm] " + l,
                             UNIT),
    # lemonade-sdk's server relaying vLLM's output (lemonade-sdk/vllm-rocm#5)
    "lemonade": (lambda l: "2026-12-05 10:00:00.370 [Info] (Process) " + l, UNIT),
    # Loki's logcli query (default output: stamp, label set, line; -o jsonl)
    "logcli": (lambda l: '2026-12-05T10:00:00Z {app="vllm", pod="vllm-0"} ' + l, NAMED),
    "logcli jsonl": (lambda l: _json(labels={"app": "vllm"}, line=l, timestamp="2026-12-05T10:00:00Z"), NAMED),
    # stern's -o json (its Log struct: message, nodeName, namespace, podName, containerName)
    "stern json": (lambda l: _json(message=l, nodeName="node-1", namespace="default", podName="vllm-0",
                                   containerName="vllm"), UNIT),
    # ---- found behind the wrapper: vLLM's record start must follow ------------------------------------
    # stern's default template "{{color .PodColor .PodName}} {{color .ContainerColor .ContainerName}} {{.Message}}",
    # with the namespace when several are tailed, and with --timestamps
    "stern": (lambda l: "vllm-5d8f9c-abcde vllm " + l, FOUND),
    "stern coloured": (lambda l: "\x1b[32mvllm-5d8f9c-abcde\x1b[0m \x1b[36mvllm\x1b[0m " + l, FOUND),
    "stern namespaces": (lambda l: "inference vllm-5d8f9c-abcde vllm " + l, FOUND),
    "stern --timestamps": (lambda l: "vllm-5d8f9c-abcde vllm " + STAMP + " " + l, FOUND),
    # Ray's worker-log prefix (print_worker_logs): a named actor's, an anonymous task's, coloured
    "Ray actor": (lambda l: "(ServeReplica:default:VLLMDeployment pid=311) " + l, PROCESS),
    "Ray task": (lambda l: "\x1b[36m(pid=311, ip=10.0.0.2)\x1b[0m " + l, PROCESS),
    # a terminal UI's box (k9s) and a pasted table cell, a quoted paste
    "box": (lambda l: "│ " + l + "     │", FOUND),
    "table cell": (lambda l: "| " + l + " |", FOUND),
    "quoted paste": (lambda l: "> " + l, FOUND),
}

# Envelopes carry a whole line, and what a person sees (a terminal UI's box, a pasted table, a quote) is
# drawn around all the rest: both stand outermost only.
ENVELOPES = frozenset({"journalctl json", "docker json-file", "logcli jsonl", "stern json"})
DISPLAY = frozenset({"box", "table cell", "quoted paste"})


def colour(line: str, form: str) -> str:
    """``line`` with vLLM's colours (the process tag cyan, system_utils.py; ColoredFormatter's level and
    dim date and file, logging_utils/formatter.py) in one of the forms a log keeps them: ESC, ESC lost,
    caret notation, rsyslog's #033."""
    esc = {"esc": "\x1b", "lost": "", "caret": "^[", "rsyslog": "#033"}[form]
    out = line
    if out.startswith("(") and ") " in out[:80]:
        tag, rest = out.split(") ", 1)
        out = f"{esc}[0;36m{tag}){esc}[0;0m " + rest
    for level, code in (("INFO ", "32"), ("WARNING ", "33"), ("ERROR ", "31"), ("DEBUG ", "37")):
        i = out.find(level)
        if 0 <= i < 100 and out[i + len(level):i + len(level) + 2].isdigit():
            out = out[:i] + f"{esc}[{code}m{level[:-1]}{esc}[0m " + out[i + len(level):]
            break
    return out
