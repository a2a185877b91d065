import argparse

import pytest

from exporter.commands.serve import add_arguments
from exporter.config import ConfigError, build


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
        ("bogus: 1\n", "bogus: unknown key"),
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
