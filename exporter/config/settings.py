"""Configuration: a YAML file, environment variables and flags, checked before anything starts.

Precedence: flag > environment (``VLLM_LOG_EXPORTER_*``) > config file > default. A bad value is
refused with the file and key named (``config.yaml: sources[1].type: ...``); nothing half-starts.

```yaml
web:
  listen_address: "127.0.0.1:10825"   # ":10825" for every interface
  telemetry_path: /metrics
  config_file: null                    # TLS and basic auth, exporter-toolkit format (see webconfig.py)
  max_connections: 0                   # open HTTP connections at most; 0: (fd limit - 64) / 2, <= 1024
log:
  level: info                          # debug | info | warning | error
  format: auto                         # auto (console on a TTY, else JSON) | console | json
timestamps:
  year: null                           # year of year-less timestamps (default: current)
  timezone: null                       # IANA zone of year-less timestamps (default: local)
stats_interval_seconds: 10             # VLLM_LOG_STATS_INTERVAL of the servers
forget_gone_after_seconds: 900         # a glob's server (pod) whose files are gone this long loses its series; 0: never
alertmanager:                          # push the log's own alerts (OOM, dead engine, ...) as well
  urls: []                             # e.g. [http://127.0.0.1:9093]
  instance: null                       # their `instance` label (default: the listen address)
  labels: {}                           # more labels, as the rules' copies get them: {host: gpu-1}
max_line_bytes: 1048576                # the longest line read whole; a longer one keeps its first
                                       # and last parts (counted, warned once per source)
max_open_files: 0                      # a glob's files open at once (the rest wait their turn);
                                       # 0: (fd limit - 64) / 2
state_file: null                       # where each source stopped (file offset, journal cursor,
                                       # container stamp), so a restart resumes there
rules: []                              # your own line families: pattern, fields, the series they feed
                                       # (format: exporter/config/rules.py; check them: vllm-log-exporter test)
rule_files: []                         # files holding more `rules:` (relative to this file); --rules FILE adds one
sources:
  - name: vllm                         # the `server` label
    type: file                         # file | stdin | journald | container | demo
    path: /var/log/vllm/vllm.log       # file; a glob (/var/log/pods/*_vllm-*/*/*.log) follows every match
    server_label: name                 # glob: `name`, or `file`: each file's <namespace>/<pod> (or stem)
    from_start: false                  # file, journald, container: read what is already there
  - name: other
    type: container
    container: other                   # container name or id
    socket: /run/podman/podman.sock    # default: podman's, else docker's
  - name: demo
    type: demo                         # replays a packaged sample log, in a loop
    sample: sample.log                 # sample.log, sample-v0.log or sample-lmcache.log
    speed: 1
  - name: svc
    type: journald
    match: vllm                        # unit (system or user), CONTAINER_NAME or SYSLOG_IDENTIFIER
    journal_directory: null            # journalctl -D: e.g. the host's /var/log/journal mounted in a container
```
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


DEFAULT_PORT = 10825
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
SOURCE_TYPES = ("file", "stdin", "journald", "container", "demo")
DEMO_SAMPLES = ("sample.log", "sample-v0.log", "sample-lmcache.log")
ENV_PREFIX = "VLLM_LOG_EXPORTER_"
# The bound on a logical line, its default and range: exporter.framing.lines' own (config imports no
# stage; tests/test_line_bound.py checks the two agree).
MAX_LINE_BYTES, MIN_LINE_BYTES, MAX_MAX_LINE_BYTES = 1 << 20, 16 << 10, 64 << 20
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# what a pushed alert's labels say of itself (exporter.alerts.from_events): not to be overridden
ALERT_OWN_LABELS = ("alertname", "server", "kind", "severity", "instance")


def instance_address(value: str, where: str) -> str:
    """An ``instance`` label as Prometheus writes a target's address: an IPv6 host in brackets. A
    chart can only join the pod's IP and the port (``$(POD_IP):10825``), so ``fd00::1:10825``
    becomes ``[fd00::1]:10825``; anything else is kept as given."""
    value = value.strip()
    if not value:
        raise ConfigError(f"{where}: empty")
    host, _, port = value.rpartition(":")
    if host.count(":") >= 1 and not host.startswith("[") and port.isdigit():
        return f"[{host}]:{port}"
    return value


class ConfigError(Exception):
    """One line naming the file (or flag/env) and key at fault."""


@dataclass
class SourceConfig:
    name: str
    type: str
    path: str | None = None
    match: str | None = None
    container: str | None = None
    socket: str | None = None
    from_start: bool = False
    speed: float = 1.0
    sample: str = "sample.log"  # demo: which packaged sample log it replays
    journal_directory: str | None = None
    # a glob of files: "file" takes each file's server label from its pod (or stem), "name" uses name
    server_label: str = "name"

    @property
    def is_glob(self) -> bool:
        import glob

        return self.type == "file" and bool(self.path) and glob.has_magic(self.path)

    @property
    def identity(self) -> str:
        """What a state-file checkpoint of this source was taken from."""
        if self.type == "file":
            return f"file:{self.path}"
        if self.type == "journald":
            return f"journald:{self.journal_directory or ''}:{self.match}"
        if self.type == "container":
            return f"container:{self.container}"
        return self.type


@dataclass
class Config:
    listen_host: str = "127.0.0.1"
    listen_port: int = DEFAULT_PORT
    telemetry_path: str = "/metrics"
    web_config_file: str | None = None
    log_level: str = "info"
    log_format: str = "auto"
    year: int | None = None
    timezone: str | None = None
    stats_interval: float = 10.0
    # a glob source's server whose files are gone this long has its series dropped (0: never)
    forget_gone_after: float = 900.0
    state_file: str | None = None
    max_connections: int = 0  # 0: (file-descriptor limit - 64) / 2, at most 1024
    max_line_bytes: int = MAX_LINE_BYTES  # the bound on a logical line (exporter.framing.lines)
    max_open_files: int = 0  # the globs' files open at once; 0: (file-descriptor limit - 64) / 2
    alertmanager_urls: list[str] = field(default_factory=list)  # where the log's own alerts are pushed
    alertmanager_instance: str | None = None  # the `instance` label of pushed alerts (default: listen address)
    # more labels of pushed alerts: what the rule's copy gets from the scrape and external labels
    alertmanager_labels: dict[str, str] = field(default_factory=dict)
    alertmanager_username: str | None = None
    alertmanager_password_file: str | None = None
    alertmanager_ca_file: str | None = None
    sources: list[SourceConfig] = field(default_factory=list)
    # the user's own line families (exporter.config.rules.RuleSpec), from rules: and rule files
    rules: list = field(default_factory=list)
    rule_files: list[str] = field(default_factory=list)
    # what running each server costs (exporter.config.cost): {"default": (per_hour, per_kwh), "servers": {...}}
    cost: dict = field(default_factory=dict)
    # where each setting came from ("config.yaml: web.telemetry_path", "--stats-interval", an env
    # name), so an error blames the flag, variable or file key the user actually wrote
    origin: dict[str, str] = field(default_factory=dict)

    @property
    def listen_address(self) -> str:
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        return f"{host}:{self.listen_port}"

    def tzinfo(self):
        return ZoneInfo(self.timezone) if self.timezone else None


def parse_listen(value: str, where: str) -> tuple[str, int]:
    m = re.fullmatch(r"(?:\[([0-9A-Fa-f:.]+)\]|([^\s:\[\]]*)):(\d{1,5})", value.strip())
    if not m or not 0 < int(m.group(3)) < 65536:
        raise ConfigError(f"{where}: {value!r} is not host:port (e.g. 127.0.0.1:{DEFAULT_PORT} or :{DEFAULT_PORT})")
    host = m.group(1) or m.group(2) or "0.0.0.0"
    return host, int(m.group(3))


def source_from_spec(spec: str, where: str, from_start: bool = False) -> SourceConfig:
    """``PATH``, ``-``, ``journald:NAME``, ``container:NAME``, ``demo``, each optionally ``SERVER=`` first."""
    name = None
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9_.:-]{0,63})=(.+)$", spec)
    if m and not os.path.exists(spec):
        name, spec = m.group(1), m.group(2)
    if not spec:
        raise ConfigError(f"{where}: empty source")
    if spec == "-":
        return SourceConfig(name=name or "stdin", type="stdin")
    if spec == "demo":
        return SourceConfig(name=name or "demo", type="demo")
    if spec.startswith("journald:"):
        target = spec[len("journald:"):]
        if not target:
            raise ConfigError(f"{where}: journald: needs a unit or container name")
        return SourceConfig(name=name or target.removesuffix(".service"), type="journald", match=target, from_start=from_start)
    if spec.startswith("container:"):
        target = spec[len("container:"):]
        if not target:
            raise ConfigError(f"{where}: container: needs a container name")
        return SourceConfig(name=name or target, type="container", container=target, from_start=from_start)
    import glob

    if glob.has_magic(spec):  # a glob of files, e.g. Kubernetes pod logs: each file labelled by its pod
        return SourceConfig(name=name or "pods", type="file", path=spec, from_start=from_start,
                            server_label="name" if name else "file")
    stem = Path(spec).name.split(".")[0] or "vllm"
    return SourceConfig(name=name or stem, type="file", path=spec, from_start=from_start)


def validate(cfg: Config, where: str = "config") -> Config:
    def at(attr: str, key: str) -> str:
        return cfg.origin.get(attr) or f"{where}: {key}"

    if cfg.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"{at('log_level', 'log.level')}: {cfg.log_level!r} is not one of debug, info, warning, error")
    cfg.log_level = cfg.log_level.lower()
    if cfg.log_format not in ("auto", "console", "json"):
        raise ConfigError(f"{at('log_format', 'log.format')}: {cfg.log_format!r} is not one of auto, console, json")
    if not cfg.telemetry_path.startswith("/") or cfg.telemetry_path in ("/", "/healthz"):
        raise ConfigError(f"{at('telemetry_path', 'web.telemetry_path')}: {cfg.telemetry_path!r} must be a path such as /metrics")
    if cfg.timezone:
        try:
            ZoneInfo(cfg.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"{at('timezone', 'timestamps.timezone')}: unknown time zone {cfg.timezone!r}") from None
    if cfg.year is not None and not 1970 <= cfg.year <= 9999:
        raise ConfigError(f"{at('year', 'timestamps.year')}: {cfg.year} is out of range")
    if not 0 < cfg.stats_interval <= 3600:
        raise ConfigError(f"{at('stats_interval', 'stats_interval_seconds')}: {cfg.stats_interval:g} must be in (0, 3600]")
    if not 0 <= cfg.forget_gone_after <= 30 * 86400:
        raise ConfigError(f"{at('forget_gone_after', 'forget_gone_after_seconds')}: {cfg.forget_gone_after:g} must be "
                          "in [0, 2592000] (0: never)")
    if isinstance(cfg.max_connections, bool) or not isinstance(cfg.max_connections, int) \
            or not 0 <= cfg.max_connections <= 100000:
        raise ConfigError(f"{at('max_connections', 'web.max_connections')}: {cfg.max_connections!r} must be a whole "
                          "number in [0, 100000] (0: the default)")
    if isinstance(cfg.max_open_files, bool) or not isinstance(cfg.max_open_files, int) \
            or not 0 <= cfg.max_open_files <= 1000000:
        raise ConfigError(f"{at('max_open_files', 'max_open_files')}: {cfg.max_open_files!r} must be a whole "
                          "number in [0, 1000000] (0: the default)")
    if isinstance(cfg.max_line_bytes, bool) or not isinstance(cfg.max_line_bytes, int) \
            or not MIN_LINE_BYTES <= cfg.max_line_bytes <= MAX_MAX_LINE_BYTES:
        raise ConfigError(f"{at('max_line_bytes', 'max_line_bytes')}: {cfg.max_line_bytes!r} must be a whole number "
                          f"in [{MIN_LINE_BYTES}, {MAX_MAX_LINE_BYTES}]")
    for url in cfg.alertmanager_urls:
        if not re.match(r"^https?://[^/\s]+", url):
            raise ConfigError(f"{at('alertmanager_urls', 'alertmanager.urls')}: {url!r} is not an http(s) URL "
                              "(e.g. http://127.0.0.1:9093)")
    if cfg.alertmanager_instance is not None:
        cfg.alertmanager_instance = instance_address(cfg.alertmanager_instance,
                                                     at("alertmanager_instance", "alertmanager.instance"))
    for name, val in cfg.alertmanager_labels.items():
        w = at("alertmanager_labels", "alertmanager.labels")
        if not _LABEL_NAME.match(name) or name.startswith("__"):
            raise ConfigError(f"{w}: {name!r} is not a Prometheus label name")
        if name in ALERT_OWN_LABELS:
            raise ConfigError(f"{w}: {name!r} is set by the alert itself"
                              + (" (use alertmanager.instance / --alertmanager.instance)" if name == "instance" else ""))
        if not val or len(val) > 1024:
            raise ConfigError(f"{w}: {name}: the value must be 1-1024 characters")
    if cfg.alertmanager_password_file and not os.access(cfg.alertmanager_password_file, os.R_OK):
        raise ConfigError(f"{where}: alertmanager.basic_auth.password_file: {cfg.alertmanager_password_file!r} "
                          "cannot be read")
    src = cfg.origin.get("sources") or f"{where}: sources"
    if not cfg.sources:
        raise ConfigError(f"{src}: none given (use --source PATH, --demo, or a config file)")
    seen = set()
    for i, s in enumerate(cfg.sources):
        w = f"{src}[{i}]"
        if not _NAME.match(s.name):
            raise ConfigError(f"{w}.name: {s.name!r} must be 1-64 letters, digits, _ . : -")
        if s.name in seen:
            raise ConfigError(f"{w}.name: {s.name!r} is used twice (each server needs its own name)")
        seen.add(s.name)
        if s.server_label not in ("name", "file"):
            raise ConfigError(f"{w}.server_label: {s.server_label!r} is not one of name, file")
        if s.type == "demo" and not 0 < s.speed <= 1000:
            raise ConfigError(f"{w}.speed: {s.speed:g} must be in (0, 1000]")
        if s.type == "demo" and s.sample not in DEMO_SAMPLES:
            raise ConfigError(f"{w}.sample: {s.sample!r} is not one of {', '.join(DEMO_SAMPLES)}")
    if cfg.state_file:
        w = at("state_file", "state_file")
        if os.path.isdir(cfg.state_file):
            raise ConfigError(f"{w}: {cfg.state_file!r} is a directory (name a file in it, e.g. {cfg.state_file.rstrip('/')}/state.json)")
        folder = os.path.dirname(os.path.abspath(cfg.state_file))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise ConfigError(f"{w}: {cfg.state_file!r}: its directory is missing or not writable")
        if os.path.exists(cfg.state_file) and not os.access(cfg.state_file, os.W_OK):
            raise ConfigError(f"{w}: {cfg.state_file!r} is not writable")
    if sum(1 for s in cfg.sources if s.type == "stdin") > 1:
        raise ConfigError(f"{src}: stdin can be read by one source only")
    return cfg
