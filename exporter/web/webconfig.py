"""``--web.config.file``: TLS and basic auth in the Prometheus exporter-toolkit format.

```yaml
tls_server_config:
  cert_file: /etc/vllm-log-exporter/server.crt
  key_file: /etc/vllm-log-exporter/server.key
  client_auth_type: RequireAndVerifyClientCert   # optional; needs client_ca_file
  client_ca_file: /etc/vllm-log-exporter/ca.crt
  min_version: TLS12                             # TLS10, TLS11, TLS12 (default) or TLS13
  max_version: TLS13                             # default: the highest OpenSSL offers
  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # Go's names; TLS <= 1.2 only, as in Go
  prefer_server_cipher_suites: true              # the server's order wins (OpenSSL's default)
  curve_preferences: [X25519]                    # one of CurveP256, CurveP384, CurveP521, X25519
basic_auth_users:
  prometheus: $2y$10$...                         # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\\n')
```

The same file works for node_exporter and friends, so Prometheus' scrape config (``scheme: https``,
``tls_config``, ``basic_auth``) is the usual one. Every key is applied or refused by name at start:
an unknown cipher suite, curve or version, a hash bcrypt cannot read. Where this differs from Go:
``curve_preferences`` takes one curve (Python's ssl restricts key exchange to exactly one group),
and ``cipher_suites`` must name suites this host's OpenSSL still offers. Every path is protected, as
exporter-toolkit does. A bad credential of any kind (unknown user, wrong or over-long password,
malformed header) is a 401, logged once per client address per minute. Successful password checks
are cached (bcrypt is deliberately slow) keyed by a hash of the pair.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import ssl
import time
from dataclasses import dataclass, field

import structlog

from aiohttp import web

from exporter.config.yaml_file import load_yaml
from exporter.config.settings import ConfigError

log = structlog.get_logger("vllm_log_exporter.web")

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
_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
             "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
# Go's names (crypto/tls, what exporter-toolkit reads) and OpenSSL's for the TLS <= 1.2 suites.
CIPHER_SUITES = {
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
# As in Go, the TLS 1.3 suites are always on and not configurable: named, they are accepted and change nothing.
TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
CURVES = {"CurveP256": "prime256v1", "CurveP384": "secp384r1", "CurveP521": "secp521r1", "X25519": "X25519"}


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    cert_not_after: float | None = None  # the server certificate's expiry (Unix seconds), where readable
    tls_settings: dict = field(default_factory=dict)  # tls_server_config as written (a reload compares them)


def cert_and_key(tls: dict) -> tuple[str, str]:
    return tls["cert_file"], tls["key_file"]


def _names(tls: dict, key: str, path: str) -> list[str]:
    v = tls.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{path}: tls_server_config.{key}: expected a list of names")
    return v


def _version(tls: dict, key: str, default: str | None, path: str):
    v = tls.get(key, default)
    if v is None:
        return None
    if v not in _VERSIONS:
        raise ConfigError(f"{path}: tls_server_config.{key}: {v!r} is not one of {', '.join(_VERSIONS)}")
    return _VERSIONS[v]


def tls_context(tls: dict, path: str) -> ssl.SSLContext:
    """Every exporter-toolkit key applied to an OpenSSL context, or a ConfigError naming the key."""
    for k in tls:
        if k not in _TLS_KEYS:
            raise ConfigError(f"{path}: tls_server_config.{k}: unknown key (expected one of: {', '.join(sorted(_TLS_KEYS))})")
    for k in ("cert_file", "key_file"):
        if not isinstance(tls.get(k), str):
            raise ConfigError(f"{path}: tls_server_config.{k}: required")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    lo, hi = _version(tls, "min_version", "TLS12", path), _version(tls, "max_version", None, path)
    if hi is not None and hi < lo:
        raise ConfigError(f"{path}: tls_server_config.max_version: {tls['max_version']} is below min_version "
                          f"{tls.get('min_version', 'TLS12')}")
    try:
        ctx.minimum_version = lo
        if hi is not None:
            ctx.maximum_version = hi
    except (ValueError, ssl.SSLError) as e:
        raise ConfigError(f"{path}: tls_server_config.min_version/max_version: not available here: {e}") from None

    suites = _names(tls, "cipher_suites", path)
    if suites:
        openssl_names = []
        for name in suites:
            if name in TLS13_SUITES:
                continue
            if name not in CIPHER_SUITES:
                raise ConfigError(f"{path}: tls_server_config.cipher_suites: {name!r} is not a cipher suite "
                                  "(Go's names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)")
            probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            try:
                probe.set_ciphers(CIPHER_SUITES[name])
            except ssl.SSLError:
                raise ConfigError(f"{path}: tls_server_config.cipher_suites: {name} is not available in this "
                                  f"OpenSSL ({ssl.OPENSSL_VERSION}) at its security level") from None
            openssl_names.append(CIPHER_SUITES[name])
        if openssl_names:
            ctx.set_ciphers(":".join(openssl_names))
        elif hi is not None and hi < ssl.TLSVersion.TLSv1_3:
            raise ConfigError(f"{path}: tls_server_config.cipher_suites: only TLS 1.3 suites listed, but "
                              "max_version is below TLS13")
    prefer = tls.get("prefer_server_cipher_suites")
    if prefer is not None:
        if not isinstance(prefer, bool):
            raise ConfigError(f"{path}: tls_server_config.prefer_server_cipher_suites: expected true or false")
        if prefer:
            ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        else:
            ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE

    curves = _names(tls, "curve_preferences", path)
    for name in curves:
        if name not in CURVES:
            raise ConfigError(f"{path}: tls_server_config.curve_preferences: {name!r} is not one of {', '.join(CURVES)}")
    if len(curves) > 1:
        # Python's ssl sets exactly one group (SSL_CTX_set1_groups with one NID); applying the first
        # and dropping the rest would refuse clients Go would serve, so say so instead.
        raise ConfigError(f"{path}: tls_server_config.curve_preferences: list one curve: Python's ssl module "
                          f"can restrict key exchange to one ({', '.join(curves)} given)")
    if curves:
        ctx.set_ecdh_curve(CURVES[curves[0]])

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
    return ctx


def certificate_not_after(cert_file: str) -> float | None:
    try:
        # the stdlib's own PEM decoder (used by its tests); no extra dependency for one date
        decoded = ssl._ssl._test_decode_cert(cert_file)  # noqa: SLF001
        return float(ssl.cert_time_to_seconds(decoded["notAfter"]))
    except Exception:  # noqa: BLE001 - an expiry we cannot read is only not shown
        return None


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
        wc.ssl_context = tls_context(tls, path)
        wc.tls_settings = dict(tls)
        wc.cert_not_after = certificate_not_after(tls["cert_file"])
    users = data.get("basic_auth_users")
    if users is not None:
        if not isinstance(users, dict):
            raise ConfigError(f"{path}: basic_auth_users: expected a mapping of user: bcrypt hash")
        import bcrypt

        for user, h in users.items():
            if not isinstance(h, str) or not h.startswith(("$2a$", "$2b$", "$2y$")):
                raise ConfigError(f"{path}: basic_auth_users.{user}: not a bcrypt hash")
            try:  # a malformed hash would otherwise fail every request with `Invalid salt`
                bcrypt.checkpw(b"", h.encode())
            except ValueError as e:
                raise ConfigError(f"{path}: basic_auth_users.{user}: not a valid bcrypt hash ({e})") from None
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


class _FailureLog:
    """One warning per client address per interval: a client retrying bad credentials cannot flood the log."""

    def __init__(self, interval: float = 60.0, clients: int = 1024):
        self.interval = interval
        self.clients = clients
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def __call__(self, remote: str, user: str, reason: str) -> None:
        now = time.monotonic()
        last = self._last.get(remote)
        if last is not None and now - last < self.interval:
            self._suppressed[remote] = self._suppressed.get(remote, 0) + 1
            return
        if len(self._last) >= self.clients:  # forget the oldest: memory stays bounded
            oldest = min(self._last, key=self._last.get)
            self._last.pop(oldest)
            self._suppressed.pop(oldest, None)
        self._last[remote] = now
        log.warning("basic auth refused", remote=remote, user=user[:64], reason=reason,
                    refused_since_last_warning=self._suppressed.pop(remote, 0))


class Auth:
    """Basic auth against ``users`` (a dict the daemon may change in place on reload; empty: open)."""

    def __init__(self, users: dict[str, bytes], failure_log: _FailureLog | None = None):
        self.users = users
        self._good: set[bytes] = set()
        self._failed = failure_log or _FailureLog()
        self._decoy: bytes | None = None
        self._decoy_of: tuple = ()

    def forget(self) -> None:
        """Drop cached successes: after a reload a removed user or changed password must not pass."""
        self._good.clear()

    def _decoy_hash(self) -> bytes:
        """A hash of the configured users' dearest cost, checked for a user name nobody has: an unknown
        name costs what a known one with a wrong password costs (63 ms against 0.9 ms told which names
        exist). Made once per set of users."""
        import bcrypt

        key = tuple(sorted(self.users.values()))
        if self._decoy is None or key != self._decoy_of:
            costs = [int(h[4:6]) for h in self.users.values() if h[:1] == b"$" and h[4:6].isdigit()]
            self._decoy = bcrypt.hashpw(b"not a password", bcrypt.gensalt(rounds=min(max(costs or [10]), 16)))
            self._decoy_of = key
        return self._decoy

    @staticmethod
    def _digest(user: str, password: bytes) -> bytes:
        return hashlib.sha256(user.encode() + b"\0" + password).digest()

    def _decoy_check(self, password: bytes) -> bool:
        return self._checkpw(password, self._decoy_hash())

    @staticmethod
    def _checkpw(password: bytes, h: bytes) -> bool:
        import bcrypt

        try:
            return bcrypt.checkpw(password, h)
        except ValueError:  # e.g. a password over bcrypt's 72 bytes: a bad credential like any other
            return False

    async def check(self, user: str, password: bytes) -> bool:
        h = self.users.get(user)
        if h is None:  # as long as a wrong password: no answer tells which user names exist
            await asyncio.get_running_loop().run_in_executor(None, self._decoy_check, password)
            return False
        d = self._digest(user, password)
        if any(hmac.compare_digest(d, g) for g in self._good):
            return True
        ok = await asyncio.get_running_loop().run_in_executor(None, self._checkpw, password, h)
        if ok and len(self._good) < 1024 and self.users.get(user) == h:
            self._good.add(d)
        return ok

    def middleware(self):
        @web.middleware
        async def middleware(request: web.Request, handler):
            if not self.users:
                return await handler(request)
            header = request.headers.get("Authorization", "")
            user, reason = "", "no credentials"
            if header.startswith("Basic "):
                try:
                    user, _, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
                except (binascii.Error, UnicodeDecodeError):
                    user, password, reason = "", "", "malformed Authorization header"
                else:
                    if user and await self.check(user, password.encode()):
                        return await handler(request)
                    reason = "unknown user or wrong password" if user else "no user"
            self._failed(request.remote or "?", user, reason)
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
