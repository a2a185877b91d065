"""``vllm-log-exporter serve``: follow logs, keep metrics, serve them (the default command)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from exporter.commands.common import add_time_options
from exporter.config.flags import build
from exporter.config.settings import DEFAULT_LISTEN, ENV_PREFIX, ConfigError


ENV_HELP = ("An option's environment variable is named in its help ($VLLM_LOG_EXPORTER_...): a flag wins "
            "over the variable, the variable over the --config file. Without a command, serve is meant: "
            "vllm-log-exporter --source /var/log/vllm/vllm.log. Every option and variable: docs/configuration.md.")


def _env(key: str, many: bool = False) -> str:
    return f" (${ENV_PREFIX}{key}{', comma-separated' if many else ''})"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = ENV_HELP
    p.add_argument("--config", metavar="FILE", help="YAML config file (docs/configuration.md); flags override it"
                   + _env("CONFIG"))
    p.add_argument("--rules", action="append", metavar="FILE",
                   help="a file of your own line families (rules: [...], docs/rules.md); repeatable, in addition to "
                        "the config file's; check one with `vllm-log-exporter test --rules FILE`" + _env("RULES", True))
    p.add_argument("--source", action="append", metavar="[SERVER=]SOURCE",
                   help="a log to follow: PATH, - (stdin), journald:UNIT, container:NAME or demo; repeatable. "
                        "SERVER= names the `server` label (default: file stem, unit or container name)"
                        + _env("SOURCE", True))
    p.add_argument("--server", metavar="NAME", help="the `server` label of the single --source" + _env("SERVER"))
    p.add_argument("--from-start", action="store_true", default=None,
                   help="read what the log already holds instead of starting at its end" + _env("FROM_START"))
    p.add_argument("--container-socket", metavar="PATH",
                   help="Docker-API socket for container: sources (default /run/podman/podman.sock, else "
                        "/var/run/docker.sock)" + _env("CONTAINER_SOCKET"))
    p.add_argument("--journal-directory", default=None, metavar="DIR",
                   help="journal location for journald: sources, passed to journalctl as -D "
                        "(default: the system journal, /var/log/journal and /run/log/journal)" + _env("JOURNAL_DIRECTORY"))
    p.add_argument("--demo", action="store_true", default=None,
                   help="replay three packaged sample logs as three servers (no vLLM needed): the first pass in "
                        "30 s, every family in view, then at the logs' own pace, in a loop" + _env("DEMO"))
    p.add_argument("--demo-speed", type=float, default=None, metavar="FACTOR",
                   help="--demo's replay speed, a factor (default 1: the logs' own pace, after a first pass of 30 s)")
    p.add_argument("--web.listen-address", dest="listen_address", default=None, metavar="[HOST]:PORT",
                   help=f"address to serve on (default {DEFAULT_LISTEN}; :PORT for every interface)"
                        + _env("WEB_LISTEN_ADDRESS"))
    p.add_argument("--web.telemetry-path", dest="telemetry_path", default=None, metavar="PATH",
                   help="metrics path (default /metrics)" + _env("WEB_TELEMETRY_PATH"))
    p.add_argument("--web.config.file", dest="web_config_file", default=None, metavar="FILE",
                   help="TLS and basic-auth settings in the exporter-toolkit format" + _env("WEB_CONFIG_FILE"))
    p.add_argument("--web.max-connections", dest="max_connections", default=None, metavar="N",
                   help="open HTTP connections at most; beyond it the one idle longest is closed "
                        "(default 0: half of the file-descriptor limit less 64, at most 1024)"
                        + _env("WEB_MAX_CONNECTIONS"))
    p.add_argument("--max-open-files", dest="max_open_files", default=None, metavar="N",
                   help="a glob's files open at once, shared by every glob; the others wait their turn, each "
                        "read on from where it was (default 0: half of the file-descriptor limit less 64)"
                        + _env("MAX_OPEN_FILES"))
    p.add_argument("--alertmanager.url", dest="alertmanager_urls", action="append", metavar="URL",
                   help="also push the log's own alerts (OOM, dead engine, GPU error, failed start) to this "
                        "Alertmanager, e.g. http://127.0.0.1:9093; repeatable" + _env("ALERTMANAGER_URL", True))
    p.add_argument("--alertmanager.instance", dest="alertmanager_instance", default=None, metavar="HOST:PORT",
                   help="the pushed alerts' `instance` label: the address Prometheus scrapes this exporter at "
                        "(default: the listen address)" + _env("ALERTMANAGER_INSTANCE"))
    p.add_argument("--alertmanager.label", dest="alertmanager_labels", action="append", metavar="NAME=VALUE",
                   help="a label for the pushed alerts, as the rules' copies get it from the scrape or Prometheus' "
                        "external labels (e.g. host=gpu-1), so the two merge in Alertmanager; repeatable"
                        + _env("ALERTMANAGER_LABELS", True))
    p.add_argument("--log.level", dest="log_level", default=None, metavar="LEVEL",
                   help="debug, info, warning or error (default info)" + _env("LOG_LEVEL"))
    p.add_argument("--log.format", dest="log_format", default=None, metavar="FORMAT",
                   help="auto (console on a TTY, else JSON), console or json" + _env("LOG_FORMAT"))
    p.add_argument("--stats-interval", type=float, default=None, metavar="SECONDS",
                   help="seconds between vLLM stats lines (the servers' VLLM_LOG_STATS_INTERVAL, default 10)"
                        + _env("STATS_INTERVAL"))
    p.add_argument("--forget-gone-after", type=float, default=None, metavar="SECONDS",
                   help="drop every series of a glob source's server (a Kubernetes pod) this long after its files "
                        "are gone, counters too, so replaced pods do not pile up (default 900; 0: never)"
                        + _env("FORGET_GONE_AFTER"))
    p.add_argument("--max-line-bytes", dest="max_line_bytes", default=None, metavar="BYTES",
                   help="the longest logical line read whole (a JSON record, a line joined from CRI parts); a "
                        "longer one keeps its first and last parts, is counted in "
                        "vllm_log_exporter_lines_truncated_total and warned about once per source (default "
                        "1048576; 16384 to 67108864; memory needed grows with it)" + _env("MAX_LINE_BYTES"))
    p.add_argument("--state-file", default=None, metavar="FILE",
                   help="JSON file keeping where each source stopped (file offset, journal cursor, container "
                        "stamp), so a restart resumes there" + _env("STATE_FILE"))
    add_time_options(p, env=_env)


def run(args: argparse.Namespace) -> int:
    try:
        cfg = build(args)
        web_cfg = None
        if cfg.web_config_file:
            from exporter.web import webconfig

            web_cfg = webconfig.load(cfg.web_config_file)
    except ConfigError as e:
        print(f"vllm-log-exporter: {e}", file=sys.stderr)
        return 2
    from exporter.config import logs
    from exporter.daemon.daemon import Daemon

    logs.setup(cfg.log_level, cfg.log_format)

    def reload():
        new = build(args)
        new_web = None
        if new.web_config_file:
            from exporter.web import webconfig

            new_web = webconfig.load(new.web_config_file)
        return new, new_web

    async def main() -> None:
        await Daemon(cfg, web_config=web_cfg, reload=reload).run()

    try:
        asyncio.run(main())
    except OSError as e:
        print(f"vllm-log-exporter: --web.listen-address {cfg.listen_address}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0
