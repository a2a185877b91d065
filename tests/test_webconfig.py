"""--web.config.file: TLS and bcrypt basic auth, as node_exporter understands them; a real Prometheus scrapes through both."""

import base64
import json
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import bcrypt
import pytest

from tests.helpers import ROOT, Exporter, Prometheus, ceiling, free_port, have, http_get, terminate, wait_until

pytestmark = pytest.mark.skipif(not shutil.which("openssl"), reason="openssl not installed")


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem"), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    h = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$", 1)
    cfg = d / "web.yml"
    cfg.write_text(f"tls_server_config:\n  cert_file: {d / 'cert.pem'}\n  key_file: {d / 'key.pem'}\n"
                   f"basic_auth_users:\n  prometheus: '{h}'\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n")
    return d, cfg


def get(url, ctx, auth=None):
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=ceiling(5)) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def test_tls_and_basic_auth(tls, tmp_path):
    d, cfg = tls
    ctx = ssl.create_default_context(cafile=str(d / "cert.pem"))
    ex = Exporter("--demo", "--web.config.file", str(cfg))
    # Exporter.start polls plain-HTTP /healthz; here the server speaks TLS only, so wait on our own.
    ex.proc = subprocess.Popen([sys.executable, "-m", "exporter", *ex.args], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        url = f"https://127.0.0.1:{ex.port}"
        wait_until(lambda: get(url + "/healthz", ctx, "prometheus:s3cret")[0] == 200, 20, what="TLS exporter up")
        status, body, headers = get(url + "/metrics", ctx, "prometheus:s3cret")
        assert status == 200 and "vllm_log_exporter_lines_total" in body
        assert headers.get("X-Content-Type-Options") == "nosniff"
        assert get(url + "/metrics", ctx)[0] == 401
        status, _, headers = get(url + "/metrics", ctx, "prometheus:wrong")
        assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="vllm-log-exporter"'
        assert get(url + "/metrics", ctx, "nobody:s3cret")[0] == 401
        # plain HTTP to the TLS port: a 400 that says why, as Go's servers answer
        status, body = http_get(f"http://127.0.0.1:{ex.port}/metrics")
        assert (status, body) == (400, "Client sent an HTTP request to an HTTPS server.\n")

        if have("prometheus"):
            config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [{
                "job_name": "vllm-log-exporter", "scheme": "https",
                "tls_config": {"ca_file": str(d / "cert.pem")},
                "basic_auth": {"username": "prometheus", "password": "s3cret"},
                "static_configs": [{"targets": [f"127.0.0.1:{ex.port}"]}]}]}
            with Prometheus(tmp_path, json.dumps(config)) as prom:
                wait_until(lambda: prom.query('vllm_log_exporter_source_up{server="demo"} == 1'), 30, 0.5,
                           what="Prometheus scraping through TLS and basic auth")
    finally:
        ex.proc.terminate()
        ex.proc.wait(10)


@pytest.mark.parametrize("text, message", [
    ("tls_server_config:\n  cert_file: /nope.pem\n  key_file: /nope.key\n", "tls_server_config.cert_file/key_file: cannot load"),
    ("tls_server_config:\n  cert_file: a\n", "tls_server_config.key_file: required"),
    ("tls_server_confg: {}\n", "tls_server_confg: unknown key"),
    ("basic_auth_users:\n  alice: plaintext\n", "basic_auth_users.alice: not a bcrypt hash"),
])
def test_bad_web_config_is_refused_with_the_key_named(tmp_path, text, message):
    cfg = tmp_path / "web.yml"
    cfg.write_text(text)
    r = subprocess.run([sys.executable, "-m", "exporter", "--demo", "--web.config.file", str(cfg)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr


def _start_tls(cfg_path, ctx, auth=None):
    """The real exporter serving TLS only; returns (process, port) once it answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--demo", "--web.listen-address", f"127.0.0.1:{port}",
                             "--log.format", "json", "--web.config.file", str(cfg_path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: proc.poll() is None and get(f"https://127.0.0.1:{port}/healthz", ctx, auth)[0] == 200, 20,
                   what="TLS exporter up")
    except BaseException:
        terminate(proc)
        raise AssertionError(f"exporter did not come up: {proc.stderr.read()}")
    return proc, port


def s_client(port, *options):
    """A real OpenSSL client: (handshake done, its brief report)."""
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-brief", *options],
                       input="", capture_output=True, text=True, timeout=20)
    out = r.stdout + r.stderr
    return r.returncode == 0 and "CONNECTION ESTABLISHED" in out, out


def _tls_config(tmp_path, tls_dir, extra: str):
    cfg = tmp_path / "web.yml"
    cfg.write_text(f"tls_server_config:\n  cert_file: {tls_dir / 'cert.pem'}\n  key_file: {tls_dir / 'key.pem'}\n{extra}")
    return cfg


# (extra keys, client options that must connect (and what the report shows), options that must not)
_CASES = {
    "max_version": ("  max_version: TLS12\n",
                    [(["-tls1_2"], "Protocol version: TLSv1.2")], [["-tls1_3"]]),
    "min_version": ("  min_version: TLS13\n",
                    [(["-tls1_3"], "Protocol version: TLSv1.3")], [["-tls1_2"]]),
    "cipher_suites": ("  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n",
                      [(["-cipher", "ECDHE-RSA-AES256-GCM-SHA384"], "Ciphersuite: ECDHE-RSA-AES256-GCM-SHA384")],
                      [["-cipher", "ECDHE-RSA-AES128-GCM-SHA256"], ["-cipher", "ECDHE-RSA-CHACHA20-POLY1305"]]),
    "prefer_server_true": ("  max_version: TLS12\n  prefer_server_cipher_suites: true\n  cipher_suites: "
                           "[TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n",
                           [(["-cipher", "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"],
                             "Ciphersuite: ECDHE-RSA-AES256-GCM-SHA384")], []),
    "prefer_server_false": ("  max_version: TLS12\n  prefer_server_cipher_suites: false\n  cipher_suites: "
                            "[TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n",
                            [(["-cipher", "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"],
                              "Ciphersuite: ECDHE-RSA-AES128-GCM-SHA256")], []),
    "curve_preferences": ("  curve_preferences: [CurveP384]\n",
                          [(["-groups", "secp384r1", "-tls1_3"], "Server Temp Key: ECDH, secp384r1"),
                           (["-groups", "secp384r1", "-tls1_2"], "Server Temp Key: ECDH, secp384r1")],
                          [["-groups", "X25519", "-tls1_3"], ["-groups", "X25519", "-tls1_2"]]),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_each_tls_setting_is_applied_as_openssl_s_client_sees_it(tls, tmp_path, case):
    extra, good, bad = _CASES[case]
    d, _ = tls
    ctx = ssl.create_default_context(cafile=str(d / "cert.pem"))
    proc, port = _start_tls(_tls_config(tmp_path, d, extra), ctx)
    try:
        for options, shown in good:
            ok, out = s_client(port, *options)
            assert ok and shown in out, (options, out)
        for options in bad:
            ok, out = s_client(port, *options)
            assert not ok, (options, out)
    finally:
        terminate(proc)


@pytest.mark.parametrize("extra, message", [
    ("  max_version: TLS12\n  cipher_suites: [TLS_BOGUS]\n", "tls_server_config.cipher_suites: 'TLS_BOGUS' is not a cipher suite"),
    ("  max_version: TLS14\n", "tls_server_config.max_version: 'TLS14' is not one of TLS10, TLS11, TLS12, TLS13"),
    ("  min_version: TLS13\n  max_version: TLS12\n", "tls_server_config.max_version: TLS12 is below min_version TLS13"),
    ("  curve_preferences: [CurveP999]\n", "tls_server_config.curve_preferences: 'CurveP999' is not one of"),
    ("  curve_preferences: [X25519, CurveP256]\n", "tls_server_config.curve_preferences: list one curve"),
    ("  prefer_server_cipher_suites: maybe\n", "tls_server_config.prefer_server_cipher_suites: expected true or false"),
    ("  cipher_suites: TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n", "tls_server_config.cipher_suites: expected a list"),
    ("  max_version: TLS12\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "only TLS 1.3 suites listed"),
    ("  client_allowed_sans: [a]\n", "tls_server_config.client_allowed_sans: unknown key"),
])
def test_a_tls_value_that_cannot_be_applied_is_refused_by_name(tls, tmp_path, extra, message):
    d, _ = tls
    cfg = _tls_config(tmp_path, d, extra)
    r = subprocess.run([sys.executable, "-m", "exporter", "--demo", "--web.config.file", str(cfg)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_malformed_bcrypt_hash_is_refused_at_start_with_the_user_named(tmp_path):
    cfg = tmp_path / "web.yml"
    cfg.write_text("basic_auth_users:\n  alice: '$2y$10$tooshort'\n")
    r = subprocess.run([sys.executable, "-m", "exporter", "--demo", "--web.config.file", str(cfg)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "basic_auth_users.alice: not a valid bcrypt hash (Invalid salt)" in r.stderr


def test_any_bad_credential_is_a_401_and_a_flood_of_them_is_logged_once(tls, tmp_path):
    d, cfg = tls
    ctx = ssl.create_default_context(cafile=str(d / "cert.pem"))
    proc, port = _start_tls(cfg, ctx, "prometheus:s3cret")
    url = f"https://127.0.0.1:{port}/metrics"
    try:
        codes = [get(url, ctx, "prometheus:" + "x" * 100)[0] for _ in range(5)]  # over bcrypt's 72 bytes
        codes += [get(url, ctx, "prometheus:wrong")[0] for _ in range(5)]
        codes += [get(url, ctx, "nobody:x")[0], get(url, ctx)[0]]
        req = urllib.request.Request(url, headers={"Authorization": "Basic !!!notbase64"})
        try:
            urllib.request.urlopen(req, context=ctx, timeout=ceiling(5))
        except urllib.error.HTTPError as e:
            codes.append(e.code)
        assert codes == [401] * 13
        assert get(url, ctx, "prometheus:s3cret")[0] == 200
    finally:
        terminate(proc)
    lines = [json.loads(x) for x in proc.stderr.read().splitlines() if x.startswith("{")]
    refused = [x for x in lines if x["event"] == "basic auth refused"]
    assert len(refused) == 1 and refused[0]["remote"] == "127.0.0.1", refused
    assert not [x for x in lines if x["level"] in ("error", "critical")], lines
    # the certificate of the fixture is valid for 2 days: said at start
    soon = [x for x in lines if x["event"] == "TLS certificate expires soon"]
    assert len(soon) == 1 and 1 < soon[0]["days_left"] <= 2


def test_the_certificate_expiry_is_a_gauge_and_an_expired_one_a_warning(tls):
    import time

    from exporter.config.settings import Config
    from exporter.daemon.daemon import Daemon
    from exporter.web.webconfig import certificate_not_after
    from structlog.testing import capture_logs

    d, _ = tls
    out = subprocess.run(["openssl", "x509", "-in", str(d / "cert.pem"), "-noout", "-enddate"], capture_output=True,
                         text=True, check=True, timeout=20).stdout.strip().split("=", 1)[1]
    not_after = certificate_not_after(str(d / "cert.pem"))
    assert not_after == ssl.cert_time_to_seconds(out)
    daemon = Daemon(Config(sources=[]))
    assert b"tls_certificate_expiry" not in daemon.metrics.render()  # no TLS, no series (not a 1970 expiry)
    with capture_logs() as logs:
        daemon._check_certificate(time.time() - 3600)
    assert [x["event"] for x in logs] == ["TLS certificate has expired; clients that verify it will refuse to scrape"]
    daemon._check_certificate(not_after)
    from tests.helpers import value

    assert value(daemon.metrics.render().decode(), "vllm_log_exporter_tls_certificate_expiry_timestamp_seconds") == not_after


def test_a_web_config_that_is_not_utf8_or_has_a_key_twice_is_one_line_naming_it(tmp_path):
    cfg = tmp_path / "web.yml"
    for raw, message in ((b"basic_auth_users:\n  al\xe9: x\n", f"{cfg}:2: not UTF-8 text (byte 0xe9 at offset 22)"),
                         (b"basic_auth_users: {}\nbasic_auth_users: {}\n", f"{cfg}:2: invalid YAML: key 'basic_auth_users' given twice")):
        cfg.write_bytes(raw)
        r = subprocess.run([sys.executable, "-m", "exporter", "--demo", "--web.config.file", str(cfg)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_the_healthcheck_command_passes_on_plain_http_on_tls_with_basic_auth_and_fails_when_nothing_answers(tls):
    """What the Containerfile and compose health checks run: /healthz is behind basic auth, and a 401 still means up."""
    d, cfg = tls

    def healthcheck(port):
        return subprocess.run([sys.executable, "-m", "exporter", "healthcheck", "--web.listen-address",
                               f"127.0.0.1:{port}", "--timeout", "2"], cwd=ROOT, capture_output=True, text=True,
                              timeout=30)

    with Exporter("--demo") as plain:
        assert healthcheck(plain.port).returncode == 0
    ctx = ssl.create_default_context(cafile=str(d / "cert.pem"))
    proc, port = _start_tls(cfg, ctx, "prometheus:s3cret")
    try:
        r = healthcheck(port)
        assert r.returncode == 0, r.stderr
    finally:
        terminate(proc)
    r = healthcheck(port)  # stopped: nothing answers
    assert r.returncode == 1 and r.stderr.startswith(f"vllm-log-exporter: healthcheck 127.0.0.1:{port}: ")
    assert r.stderr.count("\n") == 1


def test_tls_handshakes_count_against_the_connection_cap_and_a_scrape_still_answers(tls):
    import socket

    d, cfg = tls
    ctx = ssl.create_default_context(cafile=str(d / "cert.pem"))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--demo", "--web.listen-address", f"127.0.0.1:{port}",
                             "--log.format", "json", "--web.config.file", str(cfg), "--web.max-connections", "8"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    silent = []
    try:
        url = f"https://127.0.0.1:{port}"
        wait_until(lambda: get(url + "/healthz", ctx, "prometheus:s3cret")[0] == 200, 20, what="TLS exporter up")
        for _ in range(30):  # never start their handshake
            silent.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        for _ in range(3):
            status, body, _ = get(url + "/metrics", ctx, "prometheus:s3cret")
            assert status == 200 and "vllm_log_exporter_http_connections_closed_total" in body
        from tests.helpers import samples

        m = samples(body)
        assert m[("vllm_log_exporter_http_connections_closed_total", frozenset({("reason", "evicted")}))] >= 30 - 8
        assert m[("vllm_log_exporter_http_connections", frozenset())] <= 8
    finally:
        for s in silent:
            s.close()
        terminate(proc)
