"""A user's rules in the config (exporter.config.rules): what loads, and every mistake refused at load time
as one line naming the rule and the key (never at 3 a.m.), by the loader, by `serve` (which refuses to
start) and by the pattern check that keeps catastrophic backtracking out."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from exporter.commands.serve import add_arguments
from exporter.config import regex_check
from exporter.config.flags import build
from exporter.config.rules import load_rule_file, load_rules
from exporter.config.settings import ConfigError

ROOT = Path(__file__).resolve().parent.parent

GOOD = {
    "name": "offload_workers",
    "pattern": r"Unlinked mmap file \S+ after (?P<workers>\d+) workers mapped it",
    "logger": "shared_offload_region.py",
    "fields": {"workers": "int"},
    "metrics": [{"name": "custom_offload_region_workers", "type": "gauge", "value": "workers"}],
}


def rule(**changes):
    r = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v) for k, v in GOOD.items()}
    r["metrics"] = [dict(m) for m in GOOD["metrics"]]
    for k, v in changes.items():
        if v is None:
            r.pop(k, None)
        else:
            r[k] = v
    return r


def metric(**changes):
    m = dict(GOOD["metrics"][0])
    m.update(changes)
    return [m]


def error(*rules) -> str:
    with pytest.raises(ConfigError) as e:
        load_rules(list(rules), "c.yaml: rules")
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_a_good_rule_loads_with_its_needle_derived():
    (spec,) = load_rules([rule()], "c.yaml: rules")
    assert spec.name == "offload_workers" and spec.needles == ("Unlinked mmap file ",)
    assert [f.name for f in spec.fields] == ["workers"] and spec.fields[0].type == "int"
    assert spec.metrics[0].name == "custom_offload_region_workers" and spec.metrics[0].help
    assert spec.loggers == ("shared_offload_region.py",) and spec.max_chars == 2048


# Each mistake, the key it names (after "c.yaml: rules[0] (offload_workers)"), and words of the message.
MISTAKES = [
    (rule(pattern=r"Unlinked (?P<workers>\d+"), ".pattern:", "invalid: missing ), unterminated subpattern"),
    (rule(pattern=r"Unlinked mmap (?:\d+,)* after (?P<workers>\d+)"), ".pattern:", "backtrack catastrophically"),
    (rule(pattern=r"Unlinked mmap.*file.*after (?P<workers>\d+)"), ".pattern:", "cube of the line"),
    (rule(pattern=r"(?P<w>x)Unlinked mmap (?P=w) (?P<workers>\d+)"), ".pattern:", "backreferences"),
    (rule(pattern=r"(?i)unlinked mmap file after (?P<workers>\d+)"), ".pattern:", "(?i) is not allowed"),
    (rule(pattern=r"(?P<workers>\d+) (?:ab|cd)"), ".needle:", "no literal of 3+ characters"),
    (rule(needle="Created mmap"), ".needle:", "is not a literal part that every match"),
    (rule(needle="Un"), ".needle:", "at least 3 characters"),
    (rule(fields={"wokers": "int"}), ".fields.wokers:", "unknown field: the pattern has no group"),
    (rule(fields={"workers": "decimal"}), ".fields.workers.type:", "is not one of int, float, string"),
    (rule(fields={"workers": {"type": "int", "unit": "parsecs"}}), ".fields.workers.unit:", "unknown unit"),
    (rule(fields={"workers": {"type": "int", "units": "s"}}), ".fields.workers.units:", "unknown key"),
    (rule(metrics=metric(value="wokers")), ".metrics[0].value:", "unknown field 'wokers'"),
    (rule(metrics=metric(name="vllm_log_offload_workers")), ".metrics[0].name:", "the exporter's own"),
    (rule(metrics=metric(name="process_open_fds")), ".metrics[0].name:", "the exporter's own"),
    (rule(metrics=metric(name="custom:workers")), ".metrics[0].name:", "no colons"),
    (rule(metrics=metric(name="custom_workers_total")), ".metrics[0].name:", "only a counter's name ends in _total"),
    (rule(metrics=metric(type="counter")), ".metrics[0].name:", "a counter's name ends in _total"),
    (rule(metrics=metric(type="summary")), ".metrics[0].type:", "is not one of counter, gauge, histogram"),
    (rule(metrics=metric(name="custom_region_size_gb")), ".metrics[0].name:", "names a unit Prometheus does not use"),
    (rule(metrics=metric(name="custom_region_bytes")), ".metrics[0].name:", "ends in _bytes but its value has no unit"),
    (rule(fields={"workers": {"type": "int", "unit": "GB"}}), ".metrics[0].name:", "so the name ends in _bytes"),
    (rule(fields={"workers": {"type": "float", "unit": "%"}},
          metrics=metric(name="custom_x_ratio_total", type="counter")), ".metrics[0].value:", "a ratio is not"),
    (rule(metrics=metric(labels={"workers": {}})), ".metrics[0].labels.workers:", "no bound"),
    (rule(metrics=metric(labels={"workers": {"max_values": 1000}})), ".metrics[0].labels.workers.max_values:",
     "[1, 100]"),
    (rule(metrics=metric(labels={"server": {"max_values": 3}})), ".metrics[0].labels.server:", "is taken"),
    (rule(metrics=metric(labels={"w": {"field": "nope", "max_values": 3}})), ".metrics[0].labels.w.field:",
     "unknown field 'nope'"),
    (rule(metrics=metric(labels={"workers": {"values": ["1", "other"]}})), ".metrics[0].labels.workers.values:",
     "'other' is what values beyond"),
    (rule(metrics=metric(type="histogram", buckets=[5, 1])), ".metrics[0].buckets:", "upper bounds must increase"),
    (rule(metrics=metric(buckets=[1, 2])), ".metrics[0].buckets:", "only a histogram has buckets"),
    (rule(metrics=metric(value=None)), ".metrics[0].value:", "a gauge needs a value"),
    (rule(metrics=[]), ".metrics:", "expected a list of 1-16 metrics"),
    (rule(level="LOUD"), ".level:", "'LOUD' is not one of DEBUG"),
    (rule(logger="shared offload"), ".logger:", "is not a logger file"),
    (rule(client_text="yes"), ".client_text:", "expected true or false"),
    (rule(max_chars=10), ".max_chars:", "[64, 16384]"),
    (rule(colour="red"), ".colour:", "unknown key"),
]


@pytest.mark.parametrize("raw,key,words", MISTAKES, ids=[m[1] + m[2][:20] for m in MISTAKES])
def test_each_mistake_is_one_line_naming_the_rule_and_key(raw, key, words):
    msg = error(raw)
    assert msg.startswith("c.yaml: rules[0] (offload_workers)" + key), msg
    assert words in msg, msg


def test_a_name_is_checked_before_anything_else():
    assert error(rule(name="Bad Name")).startswith("c.yaml: rules[0].name: 'Bad Name' must be")


def test_two_rules_one_name_and_one_metric_two_shapes():
    assert "is already the name of c.yaml: rules[0] (offload_workers)" in error(rule(), rule())
    other = rule(name="other", metrics=metric(labels={"workers": {"max_values": 4}}))
    msg = error(rule(), other)
    assert msg.startswith("c.yaml: rules[1] (other).metrics[0].name:") and "with another type, labels" in msg
    # the same declaration fed by two rules is fine: two wordings of one fact
    assert len(load_rules([rule(), rule(name="other")], "c.yaml: rules")) == 2


def test_the_series_bound_is_the_product_of_the_labels():
    wide = rule(pattern=r"Unlinked mmap file (?P<a>\w+) (?P<b>\w+) after (?P<workers>\d+)",
                metrics=metric(labels={"a": {"max_values": 40}, "b": {"max_values": 40}}))
    assert "up to 1681 series per server" in error(wide)


def test_units_convert_and_base_unit_names_pass():
    (spec,) = load_rules([rule(fields={"workers": {"type": "float", "unit": "ms"}},
                               metrics=metric(name="custom_wait_seconds", type="histogram"))], "c.yaml: rules")
    f, m = spec.fields[0], spec.metrics[0]
    assert (f.dimension, f.scale) == ("seconds", 1e-3)
    assert m.buckets and m.buckets[0] == 0.001  # seconds' default buckets
    (spec,) = load_rules([rule(metrics=metric(name="custom_regions_total", type="counter", value=None))], "c.yaml: rules")
    assert spec.metrics[0].family == "custom_regions" and spec.metrics[0].value is None


def test_rules_come_from_the_config_and_rule_files(tmp_path):
    (tmp_path / "more.rules.yaml").write_text(yaml.safe_dump({"rules": [rule(name="second")]}))
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(yaml.safe_dump({"sources": [{"name": "a", "path": "/tmp/a.log"}], "rules": [rule()],
                                        "rule_files": ["more.rules.yaml"]}))
    p = argparse.ArgumentParser()
    add_arguments(p)
    cfg = build(p.parse_args(["--config", str(cfg_path)]), environ={})
    assert [r.name for r in cfg.rules] == ["offload_workers", "second"]
    # --rules adds files; a name given twice is refused with both places named
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump({"rules": [rule(name="second")]}))
    with pytest.raises(ConfigError) as e:
        build(p.parse_args(["--config", str(cfg_path), "--rules", str(extra)]), environ={})
    assert str(e.value).startswith(f"{extra}: rules[0].name: 'second' is already the name of {tmp_path}/more.rules.yaml")
    # the test command's --rules reads a config file's rules as well
    assert [r.name for r in load_rule_file(str(cfg_path))] == ["offload_workers", "second"]


def test_serve_refuses_to_start_with_a_broken_rule(tmp_path):
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(yaml.safe_dump({"sources": [{"name": "a", "path": str(tmp_path / "a.log")}],
                                        "rules": [rule(metrics=metric(name="custom_workers_total"))]}))
    r = subprocess.run([sys.executable, "-m", "exporter", "--config", str(cfg_path), "--web.listen-address",
                        "127.0.0.1:0"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"vllm-log-exporter: {cfg_path}: rules[0] (offload_workers).metrics[0].name: 'custom_workers_total': only a "
        "counter's name ends in _total"]


# -- the pattern check ------------------------------------------------------------------------------

SAFE = [r"Created mmap file (?P<path>\S+) \((?P<size>[\d.]+) GB\)", r"foo.*bar", r"^\d+\d+x", r"\d++\d+x",
        r"[^,]*,[^,]*,[^,]*x", r"Engine (\d+): .*?throughput: ([\d.]+)", r"x(?:, (\d+))?", r"(\w+)-(\w+)$",
        r"(?:Created|Opened) mmap file", r"a{1,3}b{2}"]
UNSAFE = [r"(?:(?:(?:(?:(?:(?:(?:ab){4}){4}){4}){4}){4}){4}){4}", r"(a+)+b", r"(?:a|ab)*c", r"(\d+,)*x", r".*foo.*bar", r"\d+\d+x", r"(?:ab)*(?:ab)*c", r"a{1,1000}a{1,1000}",
          r"(?>.*.*)x", r"(a)\1", r"(?=.*x)y", r"(?:a{1,3})*"]


@pytest.mark.parametrize("pattern", SAFE)
def test_patterns_whose_worst_case_is_at_most_square_pass(pattern):
    regex_check.check(pattern)


@pytest.mark.parametrize("pattern", UNSAFE)
def test_patterns_that_can_backtrack_catastrophically_are_refused(pattern):
    with pytest.raises(regex_check.Unsafe):
        regex_check.check(pattern)


def test_needles_are_derived_and_checked():
    assert regex_check.derive_needles(r"(?:Created|Opened) mmap file") == (" mmap file",)
    assert regex_check.derive_needles(r"(?:foo|bar)=(\d+)") == ("foo", "bar")
    assert regex_check.derive_needles(r"(?P<n>\d+) (?:ab|cd)") == ()
    assert regex_check.needles_cover(r"(?:foo|bar)=(\d+)", ("foo", "bar"))
    assert not regex_check.needles_cover(r"(?:foo|bar)=(\d+)", ("foo",))
    assert not regex_check.needles_cover(r"Created (?:mmap )?file", ("mmap",))  # optional: not in every match
