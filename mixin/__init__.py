"""The monitoring mixin: alert rules and Grafana dashboards as code, rendered into the repo by build.py."""
