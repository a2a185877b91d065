"""The HTTP side: ``/metrics``, ``/healthz`` and the landing page, connection limits in front of
aiohttp, TLS and basic auth from ``--web.config.file``.

In: the rendered metrics and the sources' state. Out: HTTP answers.
"""
