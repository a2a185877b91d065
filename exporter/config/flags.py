"""The ``serve`` command's settings from flags, the environment and the optional file, in that order of
precedence (flag > environment ``VLLM_LOG_EXPORTER_*`` > file > default), each value blamed on where it
was set."""

from __future__ import annotations

import os

from exporter.config.file import from_mapping, load_file
from exporter.config.settings import (ENV_PREFIX, Config, ConfigError, SourceConfig, parse_listen, source_from_spec,
                                      validate)

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
        (getattr(args, "max_line_bytes", None), "--max-line-bytes", "MAX_LINE_BYTES", "max_line_bytes", as_count),
        (getattr(args, "max_open_files", None), "--max-open-files", "MAX_OPEN_FILES", "max_open_files", as_count),
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
    v, w = pick(getattr(args, "alertmanager_instance", None), "--alertmanager.instance", "ALERTMANAGER_INSTANCE")
    if v is not None:
        cfg.alertmanager_instance, cfg.origin["alertmanager_instance"] = v, w
    pairs = getattr(args, "alertmanager_labels", None)
    where_labels = "--alertmanager.label"
    if not pairs and ENV_PREFIX + "ALERTMANAGER_LABELS" in env:
        pairs = [x for x in env[ENV_PREFIX + "ALERTMANAGER_LABELS"].split(",") if x.strip()]
        where_labels = ENV_PREFIX + "ALERTMANAGER_LABELS"
    if pairs:
        for pair in pairs:
            name, eq, val = pair.strip().partition("=")
            if not eq:
                raise ConfigError(f"{where_labels}: {pair!r} is not NAME=VALUE")
            cfg.alertmanager_labels[name.strip()] = val.strip()  # over the file's, name by name
        cfg.origin["alertmanager_labels"] = where_labels
    rule_files = list(getattr(args, "rules", None) or [])
    where_rules = "--rules"
    if not rule_files and ENV_PREFIX + "RULES" in env:
        rule_files = [p.strip() for p in env[ENV_PREFIX + "RULES"].split(",") if p.strip()]
        where_rules = ENV_PREFIX + "RULES"
    if rule_files:  # in addition to the config file's: rules add up
        from exporter.config import rules

        cfg.rules = cfg.rules + rules.load_all(None, rule_files, where_rules, known=cfg.rules)
        cfg.rule_files = cfg.rule_files + rule_files
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
