"""``vllm-log-exporter healthcheck``: exit 0 when the exporter answers HTTP, 1 otherwise (for
container and Quadlet health checks).

Any HTTP answer counts: with basic auth on (``--web.config.file``) every path, ``/healthz``
included, answers 401 to a check that has no password, and a 401 still proves the server is up.
A TLS port is tried as HTTPS without verifying the certificate: the check runs next to the
exporter, on loopback, and asks only whether it answers.
"""

from __future__ import annotations

import http.client
import os
import ssl
import sys

from exporter.config.settings import DEFAULT_PORT, ConfigError, parse_listen


def target(address: str | None) -> tuple[str, int]:
    address = address or os.environ.get("VLLM_LOG_EXPORTER_WEB_LISTEN_ADDRESS") or f":{DEFAULT_PORT}"
    host, port = parse_listen(address, "--web.listen-address")
    return ("127.0.0.1" if host in ("0.0.0.0", "", "::") else host), port


def probe(host: str, port: int, timeout: float, tls: bool) -> int:
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    finally:
        conn.close()


def run(args) -> int:
    try:
        host, port = target(args.web_listen_address)
    except ConfigError as e:
        print(f"vllm-log-exporter: {e}", file=sys.stderr)
        return 2
    problem = None
    for tls in (False, True):
        try:
            status = probe(host, port, args.timeout, tls)
        except (OSError, http.client.HTTPException) as e:
            problem = e
            continue
        if status in (200, 401):
            return 0
        problem = f"HTTP {status}"
    print(f"vllm-log-exporter: healthcheck {host}:{port}: {problem}", file=sys.stderr)
    return 1
