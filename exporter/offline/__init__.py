"""After the fact: one pass over a saved log (plain, ``-`` or ``.gz``) for ``parse``, ``report``,
``compare`` and ``backfill``.

In: a saved log. Out: events, run statistics, reports, OpenMetrics.
"""
