"""The config file's ``cost`` section: what running each server costs, for the cost-per-token rules.

    cost:
      per_hour: 4.0            # a flat price per server and hour, in your currency
      # or: gpu_hour: 2.0 and gpus: 2 (the GPU-hour price times the GPUs the server holds)
      per_kwh: 0.15            # optional: the energy's price, with DCGM's power scraped beside
      servers:                 # per server (its `server` label): the same keys, over the ones above
        vllm-big: {gpu_hour: 2.49, gpus: 8}

Each entry resolves to (price per hour, price per kWh), either None. A server's entry takes the keys it
gives and the section's for the rest; ``gpu_hour`` and ``gpus`` make the price per hour. The exporter
exports them (exporter.metrics.cost), so the rules divide them by the tokens served.
"""

from __future__ import annotations

import math
from typing import Any

from exporter.config.settings import ConfigError

_PRICE_KEYS = {"per_hour", "gpu_hour", "gpus", "per_kwh"}
KEYS = _PRICE_KEYS | {"servers"}


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: expected a number of 0 or more, got {value!r}")
    return float(value)


def _prices(entry: Any, where: str, top: bool = False) -> dict[str, float]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping")
    for k in entry:
        if k not in _PRICE_KEYS and not (top and k == "servers"):
            raise ConfigError(f"{where}.{k}: unknown key (expected one of: {', '.join(sorted(_PRICE_KEYS))})")
    out = {k: _number(entry[k], f"{where}.{k}") for k in _PRICE_KEYS if entry.get(k) is not None}
    if "per_hour" in out and ("gpu_hour" in out or "gpus" in out):
        raise ConfigError(f"{where}: give per_hour, or gpu_hour and gpus, not both")
    return out


def _resolve(base: dict[str, float], own: dict[str, float], where: str) -> tuple[float | None, float | None]:
    merged = dict(base)
    if "per_hour" in own:  # a flat rate replaces the section's GPU-hour price, and the other way round
        merged.pop("gpu_hour", None), merged.pop("gpus", None)
    if "gpu_hour" in own or "gpus" in own:
        merged.pop("per_hour", None)
    merged.update(own)
    if ("gpu_hour" in merged) != ("gpus" in merged):
        raise ConfigError(f"{where}: gpu_hour and gpus go together (the price is their product)")
    per_hour = merged.get("per_hour", merged["gpu_hour"] * merged["gpus"] if "gpu_hour" in merged else None)
    return per_hour, merged.get("per_kwh")


def load(section: Any, where: str) -> dict:
    """``{"default": (per_hour, per_kwh), "servers": {name: (per_hour, per_kwh)}}``, checked."""
    if section is None:
        return {}
    base = _prices(section, where, top=True)
    servers = section.get("servers") or {}
    if not isinstance(servers, dict) or not all(isinstance(k, str) and k for k in servers):
        raise ConfigError(f"{where}.servers: expected a mapping of server names to prices")
    # the section alone may give half a GPU-hour price (gpu_hour here, gpus per server): no default rate then
    half = ("gpu_hour" in base) != ("gpus" in base)
    out = {"default": (None, base.get("per_kwh")) if half else _resolve(base, {}, where), "servers": {}}
    for name, entry in servers.items():
        w = f"{where}.servers.{name}"
        out["servers"][name] = _resolve(base, _prices(entry, w), w)
    return out
