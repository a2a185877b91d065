import argparse

import pytest

from exporter.commands.serve import add_arguments
from exporter.config.flags import build
from exporter.config.settings import ConfigError


def args(*argv):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def cfg_file(tmp_path, text):
    p = tmp_path / "config.yaml"
    p.write_text(text)
    return str(p)


def test_flags_make_sources_with_names():
    cfg = build(args("--source", "/var/log/grandpa.log", "--source", "other=container:vllm2",
                     "--source", "journald:vllm.service", "--web.listen-address", ":9999"), environ={})
    assert [(s.name, s.type) for s in cfg.sources] == [("grandpa", "file"), ("other", "container"), ("vllm", "journald")]
    assert (cfg.listen_host, cfg.listen_port) == ("0.0.0.0", 9999)


def test_default_listen_address_is_loopback():
    cfg = build(args("--demo"), environ={})
    assert cfg.listen_address == "127.0.0.1:10825"


def test_env_for_the_one_source_case():
    env = {"VLLM_LOG_EXPORTER_SOURCE": "container:grandpa", "VLLM_LOG_EXPORTER_SERVER": "gp",
           "VLLM_LOG_EXPORTER_WEB_LISTEN_ADDRESS": "127.0.0.1:1234", "VLLM_LOG_EXPORTER_FROM_START": "true",
           "VLLM_LOG_EXPORTER_CONTAINER_SOCKET": "/tmp/x.sock"}
    cfg = build(args(), environ=env)
    (s,) = cfg.sources
    assert (s.name, s.type, s.container, s.socket, s.from_start) == ("gp", "container", "grandpa", "/tmp/x.sock", True)
    assert cfg.listen_port == 1234
    # a flag wins over the environment
    assert build(args("--web.listen-address", "127.0.0.1:5"), environ=env).listen_port == 5


def test_config_file(tmp_path):
    path = cfg_file(tmp_path, """
web: {listen_address: "127.0.0.1:2000", telemetry_path: /m}
log: {level: debug, format: json}
timestamps: {year: 2025, timezone: Europe/Berlin}
stats_interval_seconds: 5
sources:
  - {name: a, type: file, path: /tmp/a.log, from_start: true}
  - {name: b, type: journald, match: vllm}
  - {name: c, type: container, container: c1, socket: /run/x.sock}
""")
    cfg = build(args("--config", path), environ={})
    assert (cfg.listen_port, cfg.telemetry_path, cfg.log_level, cfg.year, cfg.timezone, cfg.stats_interval) == (
        2000, "/m", "debug", 2025, "Europe/Berlin", 5.0)
    assert [s.name for s in cfg.sources] == ["a", "b", "c"] and cfg.sources[0].from_start


@pytest.mark.parametrize(
    "text, message",
    [
        ("sources:\n  - {name: a, type: file, pathh: /x}\n", "config.yaml: sources[0].pathh: unknown key"),
        ("sources:\n  - {name: a, type: flie, path: /x}\n", "config.yaml: sources[0].type: 'flie' is not one of"),
        ("sources:\n  - {name: a, type: file}\n", "config.yaml: sources[0].path: required for a file source"),
        ("sources:\n  - {type: file, path: /x}\n", "config.yaml: sources[0].name: required"),
        ("web: {listen_address: nope}\nsources: [{name: a, type: stdin}]\n", "config.yaml: web.listen_address: 'nope' is not host:port"),
        ("sources:\n  - {name: a, type: file, path: /x, from_start: 'yes'}\n", "config.yaml: sources[0].from_start: expected true or false"),
        ("timestamps: {timezone: Mars/Olympus}\nsources: [{name: a, type: stdin}]\n", "timestamps.timezone: unknown time zone 'Mars/Olympus'"),
        ("bogus: 1\n", "config.yaml: bogus: unknown key"),
        ("- a\n- b\n", "config.yaml: expected a mapping of settings, got list"),
        ("web: {max_connections: 2.5}\nsources: [{name: a, type: stdin}]\n", "config.yaml: web.max_connections: 2.5 must be a whole number"),
        ("stats_interval_seconds: -5\nsources: [{name: a, type: stdin}]\n", "config.yaml: stats_interval_seconds: -5 must be in"),
        ("log: {level: info}\nlog: {level: debug}\nsources: [{name: a, type: stdin}]\n", "config.yaml:2: invalid YAML: key 'log' given twice (lines 1 and 2)"),
        ("sources:\n  - name: a\n    type: stdin\n    name: b\n", "config.yaml:4: invalid YAML: key 'name' given twice"),
        ("sources: [{name: a, type: stdin}, {name: a, type: demo}]\n", "sources[1].name: 'a' is used twice"),
        ("sources: [\n", "config.yaml:2: invalid YAML"),
        ("log: {level: loud}\nsources: [{name: a, type: stdin}]\n", "log.level: 'loud' is not one of"),
    ],
)
def test_bad_config_names_the_key(tmp_path, text, message):
    path = cfg_file(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        build(args("--config", path), environ={})
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_no_source_at_all_is_refused():
    with pytest.raises(ConfigError, match="sources: none given"):
        build(args(), environ={})


def test_bad_flag_values_are_named():
    with pytest.raises(ConfigError, match="--web.listen-address: 'x:y' is not host:port"):
        build(args("--demo", "--web.listen-address", "x:y"), environ={})
    with pytest.raises(ConfigError, match="VLLM_LOG_EXPORTER_FROM_START: 'maybe' is not a boolean"):
        build(args("--demo"), environ={"VLLM_LOG_EXPORTER_FROM_START": "maybe"})


def test_a_bad_flag_or_env_value_is_blamed_on_the_flag_or_env_not_the_config_file(tmp_path):
    path = cfg_file(tmp_path, "stats_interval_seconds: 5\nsources: [{name: a, type: stdin}]\n")
    with pytest.raises(ConfigError) as e:
        build(args("--config", path, "--stats-interval", "-5"), environ={})
    assert str(e.value) == "--stats-interval: -5 must be in (0, 3600]"
    with pytest.raises(ConfigError) as e:
        build(args("--config", path), environ={"VLLM_LOG_EXPORTER_LOG_LEVEL": "loud"})
    assert str(e.value).startswith("VLLM_LOG_EXPORTER_LOG_LEVEL: 'loud' is not one of")
    with pytest.raises(ConfigError) as e:
        build(args("--config", path, "--web.max-connections", "lots"), environ={})
    assert str(e.value) == "--web.max-connections: 'lots' is not a whole number"
    with pytest.raises(ConfigError) as e:
        build(args("--demo", "--web.max-connections", "-1"), environ={})
    assert str(e.value).startswith("--web.max-connections: -1 must be a whole number in [0, 100000]")
    assert build(args("--demo", "--web.max-connections", "50"), environ={}).max_connections == 50


def test_a_config_file_that_is_not_utf8_is_one_line_naming_it(tmp_path):
    p = tmp_path / "config.yaml"
    p.write_bytes(b"log: {level: \xff\xfe}\n")
    with pytest.raises(ConfigError) as e:
        build(args("--config", str(p)), environ={})
    assert str(e.value) == f"{p}:1: not UTF-8 text (byte 0xff at offset 13)"


def test_a_directory_or_an_unwritable_file_as_state_file_is_refused_at_start(tmp_path):
    with pytest.raises(ConfigError) as e:
        build(args("--demo", "--state-file", str(tmp_path)), environ={})
    assert str(e.value).startswith(f"--state-file: '{tmp_path}' is a directory")
    import os

    if os.geteuid() != 0:  # root writes whatever the mode says
        f = tmp_path / "state.json"
        f.write_text("{}")
        f.chmod(0o400)
        with pytest.raises(ConfigError, match="is not writable"):
            build(args("--demo", "--state-file", str(f)), environ={})


def test_a_yaml_source_without_type_takes_it_from_what_it_names(tmp_path):
    path = cfg_file(tmp_path, "sources:\n  - {name: a, path: /tmp/a.log}\n  - {name: b, match: vllm}\n"
                              "  - {name: c, container: c1}\n")
    cfg = build(args("--config", path), environ={})
    assert [s.type for s in cfg.sources] == ["file", "journald", "container"]
    with pytest.raises(ConfigError, match=r"sources\[0\].type: None is not one of"):
        build(args("--config", cfg_file(tmp_path, "sources:\n  - {name: a}\n")), environ={})


def test_alertmanager_urls_from_flag_env_and_file_and_a_bad_one_refused(tmp_path):
    assert build(args("--demo", "--alertmanager.url", "http://127.0.0.1:9093"), environ={}).alertmanager_urls == [
        "http://127.0.0.1:9093"]
    env = {"VLLM_LOG_EXPORTER_ALERTMANAGER_URL": "http://a:9093, https://b:9093"}
    assert build(args("--demo"), environ=env).alertmanager_urls == ["http://a:9093", "https://b:9093"]
    path = cfg_file(tmp_path, "alertmanager: {urls: ['http://am:9093'], instance: 'gpu-01:10825'}\n"
                              "sources: [{name: a, type: stdin}]\n")
    cfg = build(args("--config", path), environ={})
    assert (cfg.alertmanager_urls, cfg.alertmanager_instance) == (["http://am:9093"], "gpu-01:10825")
    with pytest.raises(ConfigError) as e:
        build(args("--demo", "--alertmanager.url", "am:9093"), environ={})
    assert str(e.value) == "--alertmanager.url: 'am:9093' is not an http(s) URL (e.g. http://127.0.0.1:9093)"
    with pytest.raises(ConfigError, match=r"alertmanager.urll: unknown key"):
        build(args("--config", cfg_file(tmp_path, "alertmanager: {urll: []}\nsources: [{name: a, type: stdin}]\n")),
              environ={})


def test_pushed_alerts_instance_and_labels_from_flags_env_and_file(tmp_path):
    """What the rule's copy of a pushed alert gets from the scrape and the external labels, so the
    two merge (the Helm chart passes the pod's IP and node through the downward API)."""
    path = cfg_file(tmp_path, "alertmanager: {urls: ['http://am:9093'], labels: {prometheus: monitoring/k8s, "
                              "host: from-file}}\nsources: [{name: a, type: stdin}]\n")
    cfg = build(args("--config", path, "--alertmanager.instance", "fd00::7:10825", "--alertmanager.label", "host=gpu-1",
                     "--alertmanager.label", "pod=vle-abc12"), environ={})
    assert cfg.alertmanager_instance == "[fd00::7]:10825"  # as Prometheus writes an IPv6 target
    assert cfg.alertmanager_labels == {"prometheus": "monitoring/k8s", "host": "gpu-1", "pod": "vle-abc12"}
    env = {"VLLM_LOG_EXPORTER_ALERTMANAGER_INSTANCE": "10.1.2.3:10825",
           "VLLM_LOG_EXPORTER_ALERTMANAGER_LABELS": "host=gpu-2, cluster=eu"}
    cfg = build(args("--demo"), environ=env)
    assert (cfg.alertmanager_instance, cfg.alertmanager_labels) == ("10.1.2.3:10825", {"host": "gpu-2", "cluster": "eu"})
    for label, words in (("server=x", "'server' is set by the alert itself"), ("instance=x", "--alertmanager.instance"),
                         ("host", "is not NAME=VALUE"), ("9host=x", "not a Prometheus label name"),
                         ("__name__=x", "not a Prometheus label name"), ("host=", "1-1024 characters")):
        with pytest.raises(ConfigError, match=words):
            build(args("--demo", "--alertmanager.label", label), environ={})


def test_forget_gone_after_from_flag_env_and_file_and_its_bounds(tmp_path):
    assert build(args("--source", "/tmp/x.log", "--forget-gone-after", "60"), environ={}).forget_gone_after == 60
    assert build(args("--source", "/tmp/x.log"), environ={}).forget_gone_after == 900
    env = {"VLLM_LOG_EXPORTER_FORGET_GONE_AFTER": "120"}
    assert build(args("--source", "/tmp/x.log"), environ=env).forget_gone_after == 120
    with pytest.raises(ConfigError, match="--forget-gone-after: -1 must be in"):
        build(args("--source", "/tmp/x.log", "--forget-gone-after", "-1"), environ={})
    path = cfg_file(tmp_path, "forget_gone_after_seconds: 0\nsources: [{name: x, path: /tmp/x.log}]\n")
    assert build(args("--config", path), environ={}).forget_gone_after == 0
