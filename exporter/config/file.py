"""The YAML config file: read (duplicate keys, bad UTF-8 and YAML errors refused with the line), and
its mapping turned into a :class:`~exporter.config.settings.Config` with every key checked by name.
The file's format is documented in exporter.config.settings."""

from __future__ import annotations

import os
from typing import Any

from exporter.config.settings import SOURCE_TYPES, Config, ConfigError, SourceConfig, parse_listen
from exporter.config.yaml_file import load_yaml

_TOP_KEYS = {"web", "log", "timestamps", "stats_interval_seconds", "forget_gone_after_seconds", "state_file", "sources",
             "alertmanager", "max_line_bytes", "max_open_files", "rules", "rule_files", "cost"}
_AM_KEYS = {"urls", "instance", "labels", "basic_auth", "tls_config"}
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


def load_file(path: str) -> dict:
    data = load_yaml(path)
    return data if data is not None else {}


_FILE_KEYS = (("listen_address", "web.listen_address"), ("telemetry_path", "web.telemetry_path"),
              ("web_config_file", "web.config_file"), ("max_connections", "web.max_connections"),
              ("log_level", "log.level"), ("log_format", "log.format"), ("year", "timestamps.year"),
              ("timezone", "timestamps.timezone"), ("stats_interval", "stats_interval_seconds"),
              ("forget_gone_after", "forget_gone_after_seconds"), ("state_file", "state_file"),
              ("max_line_bytes", "max_line_bytes"), ("max_open_files", "max_open_files"))


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
    if top.get("max_line_bytes") is not None:
        cfg.max_line_bytes = _typed(top["max_line_bytes"], int, p + "max_line_bytes")
    if top.get("max_open_files") is not None:
        cfg.max_open_files = _typed(top["max_open_files"], int, p + "max_open_files")
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
        cfg.origin["alertmanager_instance"] = p + "alertmanager.instance"
    labels = am.get("labels")
    if labels is not None:
        if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            raise ConfigError(f"{p}alertmanager.labels: expected a mapping of label names to strings")
        cfg.alertmanager_labels = dict(labels)
        cfg.origin["alertmanager_labels"] = p + "alertmanager.labels"
    auth = _expect(am.get("basic_auth"), {"username", "password_file"}, p + "alertmanager.basic_auth")
    if auth:
        cfg.alertmanager_username = _typed(auth.get("username"), str, p + "alertmanager.basic_auth.username")
        cfg.alertmanager_password_file = _typed(auth.get("password_file"), str, p + "alertmanager.basic_auth.password_file")
    tls = _expect(am.get("tls_config"), {"ca_file"}, p + "alertmanager.tls_config")
    if tls.get("ca_file") is not None:
        cfg.alertmanager_ca_file = _typed(tls["ca_file"], str, p + "alertmanager.tls_config.ca_file")
    if "rules" in top or "rule_files" in top:
        # the user's own line families (exporter.config.rules); rule files relative to this file
        from exporter.config import rules

        files = rules.file_list(top.get("rule_files"), p + "rule_files")
        base = os.path.dirname(os.path.abspath(where)) if os.path.exists(where) else None
        cfg.rules = rules.load_all(top.get("rules"), files, where, base)
        cfg.rule_files = files
    if "cost" in top:
        from exporter.config import cost

        cfg.cost = cost.load(top["cost"], p + "cost")
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
