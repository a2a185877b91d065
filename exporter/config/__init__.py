"""The exporter's settings: flags, environment, the YAML file, checked before anything starts; and
the exporter's own logging.

In: argv, environment, a file. Out: a checked :class:`~exporter.config.settings.Config`.
"""
