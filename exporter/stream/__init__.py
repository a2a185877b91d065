"""Events in context: one log stream's frames parsed in order, tracebacks joined, engines attributed,
and the lifecycle (started, serving, stopped, died, failed to start) decided once for every consumer.

In: lines of one stream. Out: events, with the derived lifecycle events; counts by result. How long each
stats window was, read from the events (exporter.stream.windows), is here too: the metrics and the offline
report count tokens by it alike, and the report needs no Prometheus for it.
"""
