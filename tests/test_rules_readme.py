"""docs/rules.md ("Your own lines: rules") runs as written: its commands print what it shows, its rule is the
example file's, its test is one of the example test file's, and its load errors are the loader's words."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

from exporter.config.rules import load_rule_file, load_rules
from exporter.config.settings import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SECTION = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")


def blocks(kind: str) -> list[str]:
    """The section's fenced blocks of one kind ("" for a bare fence), their text."""
    out, cur, lang = [], None, None
    for line in SECTION.splitlines(keepends=True):
        if line.startswith("```"):
            if cur is None:
                cur, lang = [], line[3:].strip()
            else:
                if lang == kind:
                    out.append("".join(cur))
                cur = None
        elif cur is not None:
            cur.append(line)
    return out


def _key(spec):
    return (spec.name, spec.pattern, spec.needles, spec.fields, spec.metrics, spec.help, spec.loggers, spec.levels,
            spec.processes, spec.client_text, spec.max_chars)


def test_the_commands_print_what_the_readme_shows():
    shown = blocks("console")
    assert len(shown) == 3
    # the page's `.venv/bin/vllm-log-exporter`, run as this tree's code (the venv may be another checkout's)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for block in shown:
        command, _, expected = block.partition("\n")
        assert command.startswith("$ ")
        assert ".venv/bin/vllm-log-exporter " in command  # as written after make demo / make test
        run = command[2:].replace(".venv/bin/vllm-log-exporter ", f"{sys.executable} -m exporter ")
        r = subprocess.run(run, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        if "\n...\n" in "\n" + expected:
            # an excerpt: its parts appear in order
            at = 0
            for part in [p.strip("\n") for p in ("\n" + expected).split("\n...\n") if p.strip("\n")]:
                found = r.stdout.find(part, at)
                assert found >= 0, f"{command}: not in the output:\n{part}"
                at = found + len(part)
        else:
            assert r.stdout == expected, command


def test_the_rule_shown_is_the_example_files():
    (shown,) = load_rules(yaml.safe_load(blocks("yaml")[0])["rules"], "docs/rules.md")
    example = {s.name: s for s in load_rule_file(str(ROOT / "examples" / "custom-build.rules.yaml"))}
    assert _key(shown) == _key(example[shown.name])


def test_the_test_shown_is_one_of_the_example_tests():
    (shown,) = yaml.safe_load(blocks("yaml")[1])["tests"]
    tests = yaml.safe_load((ROOT / "examples" / "custom-build.rules-test.yaml").read_text(encoding="utf-8"))["tests"]
    assert shown in tests


def test_the_load_errors_shown_are_the_loaders():
    (text,) = blocks("")
    shown = [line.removeprefix("vllm-log-exporter: ") for line in text.splitlines()]
    base = {"pattern": r"Unlinked mmap file \S+ after (?P<workers>\d+) workers mapped it", "fields": {"workers": "int"}}
    broken = [
        dict(base, name="offload_workers", metrics=[{"name": "custom_workers_total", "type": "gauge", "value": "workers"}]),
        dict(base, name="depth", pattern=r"Current speculative depth: .*(?P<workers>\d+).*",
             metrics=[{"name": "custom_depth", "type": "gauge", "value": "workers"}]),
        dict(name="quant", pattern=r"quant_mode=(?P<mode>\w+)",
             metrics=[{"name": "custom_quant_info", "type": "gauge", "value": 1, "labels": {"mode": {}}}]),
    ]
    for i, (line, rule) in enumerate(zip(shown, broken)):
        raw = [{"name": f"ok{j}", **{k: v for k, v in broken[0].items() if k != "name"},
                "metrics": [{"name": f"custom_ok{j}", "type": "gauge", "value": "workers"}]} for j in range(i)] + [rule]
        try:
            load_rules(raw, "c.yaml: rules")
        except ConfigError as e:
            got = str(e)
        else:
            raise AssertionError(f"{rule['name']} loaded")
        assert got.startswith(line.removesuffix("...").rstrip()), (line, got)
