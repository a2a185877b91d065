"""The daemon: one runner per source (source -> stream -> metrics and alerts), the state file, the
HTTP server, reloads and signals.

In: a Config. Out: a running exporter.
"""

from exporter.web.aiohttp_import import import_aiohttp

# before the daemon's modules import aiohttp: without its client's two CA-store loads (see there)
import_aiohttp()
