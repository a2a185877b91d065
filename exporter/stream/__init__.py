"""Events in context: one log stream's frames parsed in order, tracebacks joined, engines attributed,
and the lifecycle (started, serving, stopped, died, failed to start) decided once for every consumer.

In: lines of one stream. Out: events, with the derived lifecycle events; counts by result.
"""
