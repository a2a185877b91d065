"""aiohttp imported without the two TLS client contexts it fills with the system's CA store at import.

aiohttp's client module (imported by ``import aiohttp`` whatever is used of it) builds a verifying and a
non-verifying TLS context when it is imported, and each loads every certificate of the system's CA bundle:
a third of the daemon's start-up to its first /metrics answer and ~3 MB that stay (bench/startup.py), for
contexts the exporter never uses (it serves HTTP; its one HTTPS client, the Alertmanager push, builds its
own context: exporter.alerts.push). So for the length of that import the standard library's loading of the
default CA store does nothing: the two contexts are made without it, and would refuse every server's
certificate (they fail closed) if anything used them. Everywhere else, and after the import, ``ssl`` is
untouched.
"""

from __future__ import annotations

import sys


def import_aiohttp() -> None:
    """Import aiohttp (once; a no-op when it is already imported)."""
    if "aiohttp" in sys.modules:
        return
    import ssl

    cls = ssl.SSLContext
    saved = {name: cls.__dict__.get(name) for name in ("load_default_certs", "set_default_verify_paths")}

    def skipped(self, *args, **kwargs):
        return None

    try:
        cls.load_default_certs = skipped
        cls.set_default_verify_paths = skipped
        import aiohttp  # noqa: F401
    finally:
        for name, value in saved.items():
            if value is None:
                delattr(cls, name)
            else:
                setattr(cls, name, value)
