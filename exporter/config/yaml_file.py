"""Reading a YAML file the exporter is given (its config, a rules file, a web config, a rule test's
expectations): bad UTF-8, YAML errors and a key given twice are refused with the file and line, as one
ConfigError. Its own module so that every reader of YAML (config.file, config.rules, web, commands)
imports it without importing each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exporter.config.settings import ConfigError


def load_yaml(path: str) -> Any:
    """A YAML file, or a one-line ConfigError naming it (and the line, where YAML says)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
    import yaml  # only a config file needs it (start-up is measured, bench/compare.py)

    # libyaml's parser where PyYAML was built with it (a 200-rule file: 231 -> 14 ms here), the same safe
    # constructor either way
    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        pass

    def mapping(loader, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"a key that is a {type(key).__name__} (write keys as plain words)", key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice (lines {seen[key]} and {key_node.start_mark.line + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return loader.construct_mapping(node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}{at}: invalid YAML: {problem}") from None
