"""The daemon: one runner per source (source -> stream -> metrics and alerts), the state file, the
HTTP server, reloads and signals.

In: a Config. Out: a running exporter.
"""
