"""The command line's subcommands: ``serve`` (the daemon), ``parse``, ``report``, ``compare``,
``backfill`` and ``healthcheck``; each module adds its arguments and runs it."""
