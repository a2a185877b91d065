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
state_file: null                       # where each source stopped (file offset, journal cursor,
                                       # container stamp), so a restart resumes there
sources:
  - name: grandpa                      # the `server` label
    type: file                         # file | stdin | journald | container | demo
    path: /var/log/vllm/grandpa.log    # file; a glob (/var/log/pods/*_vllm-*/*/*.log) follows every match
    server_label: name                 # glob: `name`, or `file` for each file's pod name (or stem)
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
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


DEFAULT_PORT = 10825
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
SOURCE_TYPES = ("file", "stdin", "journald", "container", "demo")
DEMO_SAMPLES = ("sample.log", "sample-v0.log", "sample-lmcache.log")
ENV_PREFIX = "VLLM_LOG_EXPORTER_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


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
    alertmanager_urls: list[str] = field(default_factory=list)  # where the log's own alerts are pushed
    alertmanager_instance: str | None = None  # the `instance` label of pushed alerts (default: listen address)
    alertmanager_username: str | None = None
    alertmanager_password_file: str | None = None
    alertmanager_ca_file: str | None = None
    sources: list[SourceConfig] = field(default_factory=list)
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


_TOP_KEYS = {"web", "log", "timestamps", "stats_interval_seconds", "forget_gone_after_seconds", "state_file", "sources",
             "alertmanager"}
_AM_KEYS = {"urls", "instance", "basic_auth", "tls_config"}
_WEB_KEYS = {"listen_address", "telemetry_path", "config_file", "max_connections"}
_LOG_KEYS = {"level", "format"}
_TS_KEYS = {"year", "timezone"}
_SOURCE_KEYS = {
    "file": {"name", "type", "path", "from_start", "server_label"},
    "stdin": {"name", "type"},
    "journald": {"name", "type", "match", "journal_directory", "from_start"},
    "container": {"name", "type", "container", "socket", "from_start"},
    "demo": {"name", "type", "speed", "sample"},
}


def _expect(mapping: Any, keys: set[str], where: str) -> dict:
    if mapping is None:
        return {}
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(mapping).__name__}")
    for k in mapping:
        if k not in keys:
            at = f"{where} {k}" if where.endswith(":") else f"{where}.{k}"
            raise ConfigError(f"{at}: unknown key (expected one of: {', '.join(sorted(keys))})")
    return mapping


def _typed(value: Any, kind: type | tuple, where: str):
    if kind is bool and not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if kind is str and not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return value


def load_yaml(path: str) -> Any:
    """A YAML file, or a one-line ConfigError naming it (and the line, where YAML says)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
    import yaml  # only a config file needs it (start-up is measured, bench/compare.py)

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice (lines {seen[key]} and {key_node.start_mark.line + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return loader.construct_mapping(node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}{at}: invalid YAML: {problem}") from None


def load_file(path: str) -> dict:
    data = load_yaml(path)
    return data if data is not None else {}


_FILE_KEYS = (("listen_address", "web.listen_address"), ("telemetry_path", "web.telemetry_path"),
              ("web_config_file", "web.config_file"), ("max_connections", "web.max_connections"),
              ("log_level", "log.level"), ("log_format", "log.format"), ("year", "timestamps.year"),
              ("timezone", "timestamps.timezone"), ("stats_interval", "stats_interval_seconds"),
              ("forget_gone_after", "forget_gone_after_seconds"), ("state_file", "state_file"))


def from_mapping(data: Any, where: str, cfg: Config | None = None) -> Config:
    cfg = cfg or Config()
    p = f"{where}: "
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of settings, got {type(data).__name__}")
    top = _expect(data, _TOP_KEYS, where + ":")
    web = _expect(top.get("web"), _WEB_KEYS, p + "web")
    if "listen_address" in web:
        cfg.listen_host, cfg.listen_port = parse_listen(_typed(web["listen_address"], str, p + "web.listen_address"),
                                                        p + "web.listen_address")
    if "telemetry_path" in web:
        cfg.telemetry_path = _typed(web["telemetry_path"], str, p + "web.telemetry_path")
    if web.get("config_file") is not None:
        cfg.web_config_file = _typed(web["config_file"], str, p + "web.config_file")
    if web.get("max_connections") is not None:
        cfg.max_connections = _typed(web["max_connections"], int, p + "web.max_connections")
    lg = _expect(top.get("log"), _LOG_KEYS, p + "log")
    if "level" in lg:
        cfg.log_level = _typed(lg["level"], str, p + "log.level")
    if "format" in lg:
        cfg.log_format = _typed(lg["format"], str, p + "log.format")
    ts = _expect(top.get("timestamps"), _TS_KEYS, p + "timestamps")
    if ts.get("year") is not None:
        cfg.year = int(_typed(ts["year"], int, p + "timestamps.year"))
    if ts.get("timezone") is not None:
        cfg.timezone = _typed(ts["timezone"], str, p + "timestamps.timezone")
    if "stats_interval_seconds" in top:
        cfg.stats_interval = float(_typed(top["stats_interval_seconds"], float, p + "stats_interval_seconds"))
    if "forget_gone_after_seconds" in top:
        cfg.forget_gone_after = float(_typed(top["forget_gone_after_seconds"], float, p + "forget_gone_after_seconds"))
    if top.get("state_file") is not None:
        cfg.state_file = _typed(top["state_file"], str, p + "state_file")
    for attr, key in _FILE_KEYS:
        section, _, name = key.rpartition(".")
        holder = (top.get(section) if section else top)
        if isinstance(holder, dict) and holder.get(name) is not None:
            cfg.origin[attr] = p + key
    am = _expect(top.get("alertmanager"), _AM_KEYS, p + "alertmanager")
    if "urls" in am:
        urls = am["urls"]
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise ConfigError(f"{p}alertmanager.urls: expected a list of URLs")
        cfg.alertmanager_urls = list(urls)
        cfg.origin["alertmanager_urls"] = p + "alertmanager.urls"
    if am.get("instance") is not None:
        cfg.alertmanager_instance = _typed(am["instance"], str, p + "alertmanager.instance")
    auth = _expect(am.get("basic_auth"), {"username", "password_file"}, p + "alertmanager.basic_auth")
    if auth:
        cfg.alertmanager_username = _typed(auth.get("username"), str, p + "alertmanager.basic_auth.username")
        cfg.alertmanager_password_file = _typed(auth.get("password_file"), str, p + "alertmanager.basic_auth.password_file")
    tls = _expect(am.get("tls_config"), {"ca_file"}, p + "alertmanager.tls_config")
    if tls.get("ca_file") is not None:
        cfg.alertmanager_ca_file = _typed(tls["ca_file"], str, p + "alertmanager.tls_config.ca_file")
    sources = top.get("sources")
    if sources is not None:
        cfg.origin["sources"] = p + "sources"
        if not isinstance(sources, list):
            raise ConfigError(f"{p}sources: expected a list")
        cfg.sources = []
        for i, s in enumerate(sources):
            w = f"{p}sources[{i}]"
            if not isinstance(s, dict):
                raise ConfigError(f"{w}: expected a mapping")
            kind = s.get("type")
            if kind is None:  # as on the command line: what the source names says what it is
                named = [k for k, t in (("path", "file"), ("match", "journald"), ("container", "container")) if k in s]
                if len(named) == 1:
                    kind = dict((("path", "file"), ("match", "journald"), ("container", "container")))[named[0]]
            if kind not in SOURCE_TYPES:
                raise ConfigError(f"{w}.type: {kind!r} is not one of {', '.join(SOURCE_TYPES)}")
            _expect(s, _SOURCE_KEYS[kind], w)
            if "name" not in s:
                raise ConfigError(f"{w}.name: required (it becomes the `server` label)")
            sc = SourceConfig(name=_typed(s["name"], str, f"{w}.name"), type=kind)
            for key, typ in (("path", str), ("match", str), ("container", str), ("socket", str),
                             ("journal_directory", str), ("server_label", str), ("from_start", bool),
                             ("speed", float), ("sample", str)):
                if key in s:
                    setattr(sc, key, _typed(s[key], typ, f"{w}.{key}"))
            for needed, kinds in (("path", ("file",)), ("match", ("journald",)), ("container", ("container",))):
                if kind in kinds and not getattr(sc, needed):
                    raise ConfigError(f"{w}.{needed}: required for a {kind} source")
            cfg.sources.append(sc)
    return cfg


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
    for url in cfg.alertmanager_urls:
        if not re.match(r"^https?://[^/\s]+", url):
            raise ConfigError(f"{at('alertmanager_urls', 'alertmanager.urls')}: {url!r} is not an http(s) URL "
                              "(e.g. http://127.0.0.1:9093)")
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


def env_bool(value: str, where: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{where}: {value!r} is not a boolean (1/0, true/false)")


def build(args, environ: dict[str, str] | None = None) -> Config:
    """Config from the parsed ``serve`` flags, the environment and the optional file."""
    env = os.environ if environ is None else environ
    cfg = Config()
    where = "config"
    config_path = args.config or env.get(ENV_PREFIX + "CONFIG")
    if config_path:
        cfg = from_mapping(load_file(config_path), config_path)
        where = config_path

    def pick(flag_value, flag: str, env_key: str):
        if flag_value is not None:
            return flag_value, flag
        if ENV_PREFIX + env_key in env:
            return env[ENV_PREFIX + env_key], ENV_PREFIX + env_key
        return None, None

    def as_year(v, w):
        try:
            return int(v)
        except ValueError:
            raise ConfigError(f"{w}: {v!r} is not a year") from None

    def as_seconds(v, w):
        try:
            return float(v)
        except ValueError:
            raise ConfigError(f"{w}: {v!r} is not a number of seconds") from None

    def as_count(v, w):
        try:
            return int(v)
        except ValueError:
            raise ConfigError(f"{w}: {v!r} is not a whole number") from None

    # (parsed flag, its name, env key, Config attribute, conversion)
    settings = [
        (args.telemetry_path, "--web.telemetry-path", "WEB_TELEMETRY_PATH", "telemetry_path", None),
        (args.web_config_file, "--web.config.file", "WEB_CONFIG_FILE", "web_config_file", None),
        (args.log_level, "--log.level", "LOG_LEVEL", "log_level", None),
        (args.log_format, "--log.format", "LOG_FORMAT", "log_format", None),
        (args.year, "--year", "YEAR", "year", as_year),
        (args.timezone, "--timezone", "TIMEZONE", "timezone", None),
        (args.stats_interval, "--stats-interval", "STATS_INTERVAL", "stats_interval", as_seconds),
        (getattr(args, "forget_gone_after", None), "--forget-gone-after", "FORGET_GONE_AFTER", "forget_gone_after",
         as_seconds),
        (args.state_file, "--state-file", "STATE_FILE", "state_file", None),
        (getattr(args, "max_connections", None), "--web.max-connections", "WEB_MAX_CONNECTIONS", "max_connections",
         as_count),
    ]
    v, w = pick(args.listen_address, "--web.listen-address", "WEB_LISTEN_ADDRESS")
    if v is not None:
        cfg.listen_host, cfg.listen_port = parse_listen(v, w)
        cfg.origin["listen_address"] = w
    for flag_value, flag, env_key, attr, conv in settings:
        v, w = pick(flag_value, flag, env_key)
        if v is not None:
            setattr(cfg, attr, conv(v, w) if conv else v)
            cfg.origin[attr] = w

    urls = getattr(args, "alertmanager_urls", None)
    if urls:
        cfg.alertmanager_urls, cfg.origin["alertmanager_urls"] = list(urls), "--alertmanager.url"
    elif ENV_PREFIX + "ALERTMANAGER_URL" in env:
        cfg.alertmanager_urls = [u.strip() for u in env[ENV_PREFIX + "ALERTMANAGER_URL"].split(",") if u.strip()]
        cfg.origin["alertmanager_urls"] = ENV_PREFIX + "ALERTMANAGER_URL"
    from_start = bool(args.from_start) or env_bool(env.get(ENV_PREFIX + "FROM_START", ""), ENV_PREFIX + "FROM_START")
    demo = bool(args.demo) or env_bool(env.get(ENV_PREFIX + "DEMO", ""), ENV_PREFIX + "DEMO")
    specs = list(args.source or [])
    where_src = "--source"
    if not specs and ENV_PREFIX + "SOURCE" in env:
        specs = [s for s in env[ENV_PREFIX + "SOURCE"].split(",") if s.strip()]
        where_src = ENV_PREFIX + "SOURCE"
    if specs or demo:
        flag_sources = [source_from_spec(s.strip(), where_src, from_start) for s in specs]
        if demo:
            speed = 1.0 if args.demo_speed is None else args.demo_speed
            if not 0 < speed <= 1000:
                raise ConfigError(f"--demo-speed: {speed:g} must be in (0, 1000]")
            # the seed's server (vLLM's own KV offload) and one offloading with LMCache
            flag_sources.append(SourceConfig(name="demo", type="demo", speed=speed))
            flag_sources.append(SourceConfig(name="demo-lmcache", type="demo", speed=speed, sample="sample-lmcache.log"))
            # and a V0-era server whose restart fails (a start-up failure)
            flag_sources.append(SourceConfig(name="demo-v0", type="demo", speed=speed, sample="sample-v0.log"))
        server = args.server or env.get(ENV_PREFIX + "SERVER")
        if server:
            if len(flag_sources) != 1:
                raise ConfigError("--server: names the one source; with several, use NAME=SOURCE in each --source")
            flag_sources[0].name = server
        container_socket = args.container_socket or env.get(ENV_PREFIX + "CONTAINER_SOCKET")
        journal_directory = getattr(args, "journal_directory", None) or env.get(ENV_PREFIX + "JOURNAL_DIRECTORY")
        for s in flag_sources:
            if s.type == "container" and container_socket:
                s.socket = container_socket
            if s.type == "journald" and journal_directory:
                s.journal_directory = journal_directory
        cfg.sources = flag_sources
        cfg.origin["sources"] = where_src
    elif from_start:
        for s in cfg.sources:
            s.from_start = True
    return validate(cfg, where)
