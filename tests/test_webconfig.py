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

from tests.helpers import ROOT, Exporter, Prometheus, have, wait_until

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
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
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
        with pytest.raises(OSError):  # plain HTTP is not served (URLError or a dropped connection)
            urllib.request.urlopen(f"http://127.0.0.1:{ex.port}/metrics", timeout=5)

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
