"""``--web.config.file``: TLS and basic auth in the Prometheus exporter-toolkit format.

```yaml
tls_server_config:
  cert_file: /etc/vllm-log-exporter/server.crt
  key_file: /etc/vllm-log-exporter/server.key
  client_auth_type: RequireAndVerifyClientCert   # optional; needs client_ca_file
  client_ca_file: /etc/vllm-log-exporter/ca.crt
  min_version: TLS12                             # TLS12 (default) or TLS13
basic_auth_users:
  prometheus: $2y$10$...                         # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\\n')
```

The same file works for node_exporter and friends, so Prometheus' scrape config (``scheme: https``,
``tls_config``, ``basic_auth``) is the usual one. Every path is protected, as exporter-toolkit does.
Successful password checks are cached (bcrypt is deliberately slow) keyed by a hash of the pair.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import ssl
from dataclasses import dataclass, field

from aiohttp import web

from exporter.config import ConfigError, load_yaml

_TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "cipher_suites",
             "curve_preferences", "prefer_server_cipher_suites", "max_version"}
_TOP_KEYS = {"tls_server_config", "basic_auth_users", "http_server_config"}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def load(path: str) -> WebConfig:
    data = load_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping")
    for k in data:
        if k not in _TOP_KEYS:
            raise ConfigError(f"{path}: {k}: unknown key (expected one of: {', '.join(sorted(_TOP_KEYS))})")
    wc = WebConfig()
    tls = data.get("tls_server_config")
    if tls is not None:
        if not isinstance(tls, dict):
            raise ConfigError(f"{path}: tls_server_config: expected a mapping")
        for k in tls:
            if k not in _TLS_KEYS:
                raise ConfigError(f"{path}: tls_server_config.{k}: unknown key")
        for k in ("cert_file", "key_file"):
            if not isinstance(tls.get(k), str):
                raise ConfigError(f"{path}: tls_server_config.{k}: required")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        min_v = tls.get("min_version", "TLS12")
        if min_v not in _VERSIONS:
            raise ConfigError(f"{path}: tls_server_config.min_version: {min_v!r} is not TLS12 or TLS13")
        ctx.minimum_version = _VERSIONS[min_v]
        try:
            ctx.load_cert_chain(tls["cert_file"], tls["key_file"])
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"{path}: tls_server_config.cert_file/key_file: cannot load: {e}") from None
        auth = tls.get("client_auth_type", "NoClientCert")
        if auth not in _CLIENT_AUTH:
            raise ConfigError(f"{path}: tls_server_config.client_auth_type: {auth!r} is not one of {', '.join(_CLIENT_AUTH)}")
        ctx.verify_mode = _CLIENT_AUTH[auth]
        if auth != "NoClientCert":
            ca = tls.get("client_ca_file")
            if auth in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert") and not ca:
                raise ConfigError(f"{path}: tls_server_config.client_ca_file: required for {auth}")
            if ca:
                try:
                    ctx.load_verify_locations(ca)
                except (OSError, ssl.SSLError) as e:
                    raise ConfigError(f"{path}: tls_server_config.client_ca_file: cannot load: {e}") from None
        wc.ssl_context = ctx
    users = data.get("basic_auth_users")
    if users is not None:
        if not isinstance(users, dict):
            raise ConfigError(f"{path}: basic_auth_users: expected a mapping of user: bcrypt hash")
        for user, h in users.items():
            if not isinstance(h, str) or not h.startswith(("$2a$", "$2b$", "$2y$")):
                raise ConfigError(f"{path}: basic_auth_users.{user}: not a bcrypt hash")
            wc.users[str(user)] = h.encode()
    http = data.get("http_server_config") or {}
    if not isinstance(http, dict):
        raise ConfigError(f"{path}: http_server_config: expected a mapping")
    for k, v in http.items():
        if k == "headers" and isinstance(v, dict):
            wc.headers = {str(a): str(b) for a, b in v.items()}
        elif k != "http2":
            raise ConfigError(f"{path}: http_server_config.{k}: unknown key")
    return wc


def auth_middleware(users: dict[str, bytes]):
    import bcrypt

    good: set[bytes] = set()

    def digest(user: str, password: bytes) -> bytes:
        return hashlib.sha256(user.encode() + b"\0" + password).digest()

    async def check(user: str, password: bytes) -> bool:
        h = users.get(user)
        if h is None:
            return False
        d = digest(user, password)
        if any(hmac.compare_digest(d, g) for g in good):
            return True
        ok = await asyncio.get_running_loop().run_in_executor(None, bcrypt.checkpw, password, h)
        if ok and len(good) < 1024:
            good.add(d)
        return ok

    @web.middleware
    async def middleware(request: web.Request, handler):
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                user, password = "", ""
            if user and await check(user, password.encode()):
                return await handler(request)
        return web.Response(status=401, text="Unauthorized\n",
                            headers={"WWW-Authenticate": 'Basic realm="vllm-log-exporter"'})

    return middleware


def headers_middleware(headers: dict[str, str]):
    @web.middleware
    async def middleware(request: web.Request, handler):
        resp = await handler(request)
        for k, v in headers.items():
            resp.headers[k] = v
        return resp

    return middleware
