"""The daemon: its runners (exporter.daemon.runners), the HTTP server, the state file, reloads and signals."""

from __future__ import annotations

import asyncio
import signal

import structlog
from aiohttp import web

from exporter.config.settings import Config
from exporter.daemon.globs import GlobRunner
from exporter.daemon.runners import SourceRunner, make_source
from exporter.daemon.turns import Budget, default_max_open_files
from exporter.daemon.supervise import Supervisor
from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.parsers.rules import families as rule_families
from exporter.web.server import make_app

log = structlog.get_logger("vllm_log_exporter")


def _interval_warning(server: str, seen: float, configured: float) -> None:
    log.warning("the log's stats lines come at another interval than --stats-interval (VLLM_LOG_STATS_INTERVAL "
                "of the server?): token counters use the log's", server=server, log_interval_s=round(seen, 2),
                configured_s=configured)


class Daemon:
    def __init__(self, cfg: Config, metrics: Metrics | None = None, web_config=None, reload=None):
        """``reload`` builds a fresh (Config, WebConfig | None) from the same flags and files, for SIGHUP."""
        self.cfg = cfg
        self._reload = reload
        self.web_config = web_config
        self.metrics = metrics or Metrics(stats_interval=cfg.stats_interval)
        self.supervisor = Supervisor(on_failure=lambda task: self.metrics.task_failures.labels(task).inc())
        self._render_error: str | None = None
        # the user's rules (exporter.config.rules): their parsers join every stream, their series the metrics
        self.metrics.set_rules(cfg.rules)
        self.metrics.set_costs(cfg.cost)  # the config's prices, for the cost-per-token rules
        families = rule_families(cfg.rules)
        # The demo replays its samples with their stamps moved to the moment of replay, its first pass squeezed
        # into 30 s: its stats lines come faster than any interval, by design, not by the user's setting.
        demo = {s.name for s in cfg.sources if s.type == "demo"}
        self.metrics.interval_warning = lambda server, seen, configured: (
            None if server in demo else _interval_warning(server, seen, configured))
        clock = Clock(year=cfg.year, tz=cfg.tzinfo())
        saved = {}
        if cfg.state_file:
            from exporter.sources import state

            saved = state.load(cfg.state_file)
        self.alerts = None
        if cfg.alertmanager_urls:
            from exporter.alerts.from_events import Alerts

            # the instance label Prometheus gives this exporter by default: its scrape address
            self.alerts = Alerts(instance=cfg.alertmanager_instance or cfg.listen_address,
                                 labels=dict(cfg.alertmanager_labels))
        self.runners: list[SourceRunner | GlobRunner] = []
        # the files the globs hold open at once (exporter.daemon.turns)
        budget = Budget(cfg.max_open_files or default_max_open_files())
        for sc in cfg.sources:
            if sc.type == "file" and sc.is_glob:
                self.runners.append(GlobRunner(sc, self.metrics, clock, saved, self.alerts,
                                               forget_after=cfg.forget_gone_after, max_line=cfg.max_line_bytes,
                                               families=families, supervisor=self.supervisor, budget=budget))
                continue
            # a checkpoint only counts for what it was taken from: a source pointed elsewhere starts as configured
            resume = saved[sc.name][1] if sc.name in saved and saved[sc.name][0] == sc.identity else None
            self.runners.append(SourceRunner(make_source(sc, resume, cfg.max_line_bytes), self.metrics, clock,
                                             sc.identity, alerts=self.alerts, max_line=cfg.max_line_bytes,
                                             families=families, supervisor=self.supervisor))
        self._saved_state = None
        self._state_error: str | None = None
        self._auth = None
        self._stop = asyncio.Event()
        self._web: web.AppRunner | None = None

    def sources(self) -> dict[str, bool]:
        out: dict[str, bool] = {}
        for r in self.runners:
            out.update(r.states())
        return out

    def waiting(self) -> dict[str, str]:
        """Sources waiting for what may never come (a file whose directory is missing, or absent for long)."""
        out: dict[str, str] = {}
        for r in self.runners:
            waits = getattr(r, "waits", None)
            if waits is not None:
                out.update(waits())
        return out

    async def start_web(self) -> None:
        from exporter.web.guard import Guard, GuardedSite, Limits

        self.guard = Guard(Limits(max_connections=self.cfg.max_connections),
                           on_close=lambda reason: self.metrics.http_closed.labels(reason).inc(),
                           on_count=self.metrics.http_connections.set)
        middlewares = [self.guard.middleware()]
        wc = self.web_config
        if wc is not None:
            from exporter.web import webconfig

            # installed whenever there is a web config, and given the dicts themselves: a reload
            # (SIGHUP) changes users and headers in place, even from none to some
            middlewares.append(webconfig.headers_middleware(wc.headers))
            self._auth = webconfig.Auth(wc.users)
            middlewares.append(self._auth.middleware())
        app = make_app(self._guarded(self.metrics.render), self.cfg.telemetry_path, self.sources, middlewares,
                       self.problems, render_openmetrics=self._guarded(self.metrics.render_openmetrics),
                       notes=self.metrics.notes,
                       waiting=self.waiting)
        self._web = web.AppRunner(app, access_log=None)
        await self._web.setup()
        ssl_context = wc.ssl_context if wc is not None else None
        if wc is not None and wc.cert_not_after is not None:
            self._check_certificate(wc.cert_not_after)
        site = GuardedSite(self._web, self.cfg.listen_host, self.cfg.listen_port, self.guard, ssl_context=ssl_context)
        await site.start()
        log.info("listening", address=self.cfg.listen_address, telemetry_path=self.cfg.telemetry_path,
                 tls=ssl_context is not None, basic_auth=bool(wc and wc.users),
                 max_connections=self.guard.max_connections,
                 sources=[f"{s.name}={s.type}" for s in self.cfg.sources])

    def _guarded(self, render):
        """``render`` for /metrics: a failure is counted (task http), said in one line and shown in
        /healthz until a scrape succeeds again; that scrape answers 500."""

        def guarded() -> bytes:
            try:
                body = render()
            except Exception as e:
                self.supervisor.failed("http", e, then="this scrape answered 500")
                self._render_error = f"{type(e).__name__}: {e}"[:300]
                raise
            self._render_error = None
            return body

        return guarded

    def _check_certificate(self, not_after: float) -> None:
        import time as _time

        self.metrics.tls_certificate(not_after)
        left = not_after - _time.time()
        when = _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime(not_after))
        if left <= 0:
            log.warning("TLS certificate has expired; clients that verify it will refuse to scrape",
                        not_after=when, path=self.cfg.web_config_file)
        elif left < 14 * 86400:
            log.warning("TLS certificate expires soon", not_after=when, days_left=round(left / 86400, 1),
                        path=self.cfg.web_config_file)

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            for r in self.runners:
                try:
                    r.flush()
                except Exception as e:  # noqa: BLE001 - that runner's flush is lost, the others' not
                    self.supervisor.failed("flush", e, r.name, then="going on")

    def stop(self, signame: str | None = None) -> None:
        if signame:
            log.info("signal received; saving state and stopping", signal=signame)
        self._stop.set()

    def reload(self) -> None:
        """SIGHUP: what can change while running does (log level, basic-auth users, headers, the TLS
        certificate and key, so a renewed certificate needs no restart; the user's rules); what needs the
        socket or the sources rebuilt is named in a warning. A config that does not load (a broken rule
        included) is refused, nothing changes: the rules running stay."""
        self.save_state()
        if self._reload is None:
            log.warning("reload asked (SIGHUP) but this daemon has no config to reload")
            return
        from exporter.config.settings import ConfigError

        try:
            new, wc = self._reload()
        except ConfigError as e:
            log.error("reload refused; running on as before", error=str(e))
            return
        except Exception as e:  # noqa: BLE001 - a config nobody foresaw: refused the same way, in one line
            log.error("reload refused; running on as before", error=f"{type(e).__name__}: {e}"[:300])
            return
        applied, restart = [], []
        old = self.cfg
        if (new.log_level, new.log_format) != (old.log_level, old.log_format):
            from exporter.config import logs

            logs.setup(new.log_level, new.log_format)
            old.log_level, old.log_format = new.log_level, new.log_format
            applied.append("log")
        for attr, key in (("listen_address", "web.listen_address"), ("telemetry_path", "web.telemetry_path"),
                          ("web_config_file", "web.config_file"), ("max_connections", "web.max_connections"),
                          ("state_file", "state_file"), ("stats_interval", "stats_interval_seconds"),
                          ("year", "timestamps.year"), ("timezone", "timestamps.timezone"),
                          ("max_line_bytes", "max_line_bytes"), ("max_open_files", "max_open_files")):
            if getattr(new, attr) != getattr(old, attr):
                restart.append(key)
        def sources(cfg):
            return [(s.name, s.identity, s.type, s.from_start, s.socket, s.server_label) for s in cfg.sources]

        if sources(new) != sources(old):
            restart.append("sources")
        if _rules_key(new.rules) != _rules_key(old.rules):
            self.metrics.set_rules(new.rules)
            families = rule_families(new.rules)
            for r in self.runners:
                r.set_families(families)
            old.rules, old.rule_files = new.rules, new.rule_files
            applied.append("rules")
            log.info("rules loaded", rules=[r.name for r in new.rules])
        if new.cost != old.cost:
            self.metrics.set_costs(new.cost)
            old.cost = new.cost
            applied.append("cost")
        cur = self.web_config
        if wc is not None and cur is not None and new.web_config_file == old.web_config_file:
            if wc.users != cur.users:
                cur.users.clear()
                cur.users.update(wc.users)
                self._auth.forget()
                applied.append("basic_auth_users")
            if wc.headers != cur.headers:
                cur.headers.clear()
                cur.headers.update(wc.headers)
                applied.append("http_server_config.headers")
            if cur.ssl_context is not None and wc.ssl_context is not None:
                from exporter.web import webconfig

                if wc.tls_settings != cur.tls_settings:
                    restart.append("tls_server_config")
                # always re-read: the files may hold a renewed certificate under the same names
                cur.ssl_context.load_cert_chain(*webconfig.cert_and_key(wc.tls_settings))
                cur.cert_not_after = wc.cert_not_after
                if wc.cert_not_after is not None:
                    self._check_certificate(wc.cert_not_after)
                applied.append("tls certificate")
            elif (cur.ssl_context is None) != (wc.ssl_context is None):
                restart.append("tls_server_config")
        log.info("reloaded (SIGHUP)", applied=applied)
        if restart:
            log.warning("changed settings need a restart to apply", settings=sorted(set(restart)))

    def save_state(self) -> None:
        if not self.cfg.state_file:
            return
        from exporter.sources import state

        positions = {}
        for r in self.runners:
            positions.update(r.checkpoints())
        if positions != self._saved_state or self._state_error:
            try:
                state.save(self.cfg.state_file, positions)
                self._saved_state = positions
            except OSError as e:
                self.metrics.state_write_errors.inc()
                error = e.strerror or str(e)
                if error != self._state_error:  # once per cause, not once a second
                    log.warning("state file not written; a restart will re-read from older positions",
                                path=self.cfg.state_file, error=error)
                self._state_error = error
                return
            if self._state_error:
                log.info("state file written again", path=self.cfg.state_file)
                self._state_error = None

    def problems(self) -> dict[str, str]:
        out = {"state_file": f"cannot write {self.cfg.state_file}: {self._state_error}"} if self._state_error else {}
        if self._render_error:
            out["metrics"] = f"the last scrape could not be answered: {self._render_error}"
        return out

    async def _state_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.save_state()

    def _loop_failed(self, loop, context: dict) -> None:
        """What asyncio would print as a traceback (a connection the HTTP server could not take, an
        accept that found no descriptor, any callback that raised): counted (task loop) and one line;
        the server goes on serving the other connections."""
        error = context.get("exception")
        if error is None:
            log.warning("event loop: " + str(context.get("message", "?"))[:300])
            return
        self.supervisor.failed("loop", error, str(context.get("message", ""))[:120] or None, then="serving on")

    async def run(self) -> None:
        await self.start_web()
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._loop_failed)
        # Every signal that would end the process by default ends it here with the state saved.
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
            try:
                loop.add_signal_handler(sig, self.stop, sig.name)
            except (NotImplementedError, RuntimeError):
                pass
        try:
            loop.add_signal_handler(signal.SIGHUP, self.reload)
        except (NotImplementedError, RuntimeError):
            pass
        keep = self.supervisor.keep
        tasks = [asyncio.create_task(keep("scan" if isinstance(r, GlobRunner) else "source", r.run, r.name),
                                     name=f"source:{r.name}") for r in self.runners]
        tasks.append(asyncio.create_task(keep("flush", self._flush_loop), name="flush"))
        if self.alerts is not None:
            from exporter.alerts.push import AlertPusher

            password = None
            if self.cfg.alertmanager_password_file:
                with open(self.cfg.alertmanager_password_file, encoding="utf-8") as f:
                    password = f.read().strip()
            pusher = AlertPusher(self.alerts, self.cfg.alertmanager_urls,
                                 on_result=lambda result: self.metrics.alerts_sent.labels(result).inc(),
                                 username=self.cfg.alertmanager_username, password=password,
                                 ca_file=self.cfg.alertmanager_ca_file)
            tasks.append(asyncio.create_task(keep("alerts", pusher.run), name="alerts"))
        if self.cfg.state_file:
            tasks.append(asyncio.create_task(keep("state", self._state_loop), name="state"))
        try:
            await self._stop.wait()
        finally:
            log.info("stopping")
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.save_state()
            if self._web is not None:
                await self._web.cleanup()


def _rules_key(rules) -> list:
    """What a reload compares: each rule as it was declared (its checked spec, less where it was read)."""
    return [(r.name, r.pattern, r.needles, r.fields, r.metrics, r.help, r.loggers, r.levels, r.processes,
             r.client_text, r.max_chars) for r in rules]
