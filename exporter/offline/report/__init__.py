"""A whole run's statistics and their reports: RunStats collects from events (stats), Summary says
what they mean (summary), Markdown and HTML render one run, compare sets several side by side."""
