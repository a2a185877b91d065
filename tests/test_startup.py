"""What the daemon's start-up leaves out (bench/startup.py measures it): aiohttp's client TLS contexts without
the CA store, and patterns compiled on first use; neither changes what the exporter does. And what the offline
commands leave out: the metrics and prometheus_client."""

from __future__ import annotations

import ssl
import subprocess
import sys

from exporter.alerts.push import AlertPusher
from exporter.parsers.base import LazyPattern, lazy_compile

CHECK = r"""
import ssl, sys
import exporter.daemon  # imports aiohttp the daemon's way
import aiohttp.connector as c
assert "aiohttp" in sys.modules
# aiohttp's own defaults hold no certificate (they are never used) ...
print(c._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"], c._SSL_CONTEXT_UNVERIFIED.cert_store_stats()["x509_ca"])
# ... and the standard library is itself again: a default context loads the system's CA store
print(ssl.create_default_context().cert_store_stats()["x509_ca"])
print("load_default_certs" in ssl.SSLContext.__dict__, "set_default_verify_paths" in ssl.SSLContext.__dict__)
"""


def test_aiohttp_is_imported_without_its_ca_loads_and_ssl_is_left_as_it_was():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    aio_verified, aio_unverified, ours, load_defined, paths_defined = out.stdout.split()
    assert (aio_verified, aio_unverified) == ("0", "0"), out.stdout
    system = ssl.create_default_context().cert_store_stats()["x509_ca"]
    assert int(ours) == system > 0, out.stdout  # (this machine has a CA store: the check can tell)
    assert (load_defined, paths_defined) == ("True", "False"), out.stdout


def test_the_alertmanager_push_over_https_verifies_with_the_system_store():
    https = AlertPusher(None, ["https://am.example:9093"])
    assert isinstance(https.ssl, ssl.SSLContext) and https.ssl.verify_mode == ssl.CERT_REQUIRED
    assert https.ssl.cert_store_stats()["x509_ca"] > 0 and https.ssl.check_hostname
    assert AlertPusher(None, ["http://am:9093"]).ssl is None  # (no TLS)


def test_a_lazy_pattern_is_the_pattern():
    for pattern, text in ((r"a(b+)c", "xxabbbc"), (r"(?P<n>\d+) ms", "took 12 ms"), (r"^$", "")):
        lazy, rx = lazy_compile(pattern), __import__("re").compile(pattern)
        assert isinstance(lazy, LazyPattern) and lazy.pattern == pattern
        for method in ("match", "search", "fullmatch", "findall", "split"):
            got, want = getattr(lazy, method)(text), getattr(rx, method)(text)
            got = got.groups() if hasattr(got, "groups") else got
            want = want.groups() if hasattr(want, "groups") else want
            assert got == want, (pattern, method)
        assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in rx.finditer(text)]
        assert lazy.sub("-", text) == rx.sub("-", text) and lazy.groups == rx.groups
        assert lazy.groupindex == rx.groupindex and lazy.flags == rx.flags
        assert lazy.match.__self__ is lazy._rx  # (after the first use: the compiled pattern's own method)


def test_report_and_compare_read_a_log_without_importing_the_metrics_or_prometheus_client(tmp_path):
    """They count a run's tokens by the stats windows as the metrics do, but import neither the metrics nor
    prometheus_client (~70 ms of every run's start-up here)."""
    log = tmp_path / "one.log"
    log.write_text("Aug 04 00:01:54 gpu-host vllm[4242]: (APIServer pid=53) INFO 08-04 00:01:54 [loggers.py:314] "
                   "Engine 000: Avg prompt throughput: 442.0 tokens/s, Avg generation throughput: 230.7 tokens/s, "
                   "Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.4%, Prefix cache hit rate: 96.5%\n")
    check = (
        "import sys, runpy\n"
        f"sys.argv = ['vllm-log-exporter', 'report', '--year', '2026', '--format', 'json', {str(log)!r}]\n"
        "try:\n    runpy.run_module('exporter', run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "print([m for m in sys.modules if m == 'prometheus_client' or m.startswith('exporter.metrics')])\n")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert '"windows": 1,' in out.stdout, out.stdout[:500]  # (it did read the line)
    assert out.stdout.rstrip().endswith("[]"), out.stdout[-500:]
