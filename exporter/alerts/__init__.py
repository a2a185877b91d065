"""Alerts in the log's own words: made from lifecycle and error events, pushed to Alertmanager.

In: events. Out: alerts (state) and their posts to Alertmanager's API.
"""
