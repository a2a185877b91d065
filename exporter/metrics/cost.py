"""What running each server costs, from the config's cost section (exporter.config.cost): the rules
divide it by the tokens served (mixin/cost.py). Not from the log: a price is the operator's.

Emitted:
    vllm_log_cost_per_hour (the price of running the server for an hour, in the currency it was given in:
    a flat rate, or the GPU-hour price times its GPUs), vllm_log_energy_price_per_kwh (the energy's price,
    for the rules that read DCGM's power). Absent for a server no price applies to. Kept across the
    server's restarts; set again on a reload.
"""

from __future__ import annotations


class CostMetrics:
    """Part of exporter.metrics.Metrics: the prices the config gives."""

    def _declare_cost(self, S: list[str]) -> None:
        lg = self._lasting_gauge
        self.cost_per_hour = lg("vllm_log_cost_per_hour", "What running the server costs per hour, from the "
                                "exporter's config (cost: per_hour, or gpu_hour times gpus), in the currency it was "
                                "priced in: the rules divide it by the tokens served (vllm_log:cost_per_million_"
                                "generated_tokens).", S)
        self.energy_price = lg("vllm_log_energy_price_per_kwh", "The energy's price per kWh, from the exporter's "
                               "config (cost: per_kwh): the rules add DCGM's power times it to the hourly cost.", S)
        self._costs: dict = {}

    def set_costs(self, costs: dict) -> None:
        """``{"default": (per_hour, per_kwh), "servers": {name: (per_hour, per_kwh)}}``; the servers known so
        far get theirs at once (a reload), later ones when they are added."""
        self._costs = costs or {}
        for server in self._servers:
            self._touch_cost(server)

    def _touch_cost(self, server: str) -> None:
        per_hour, per_kwh = (self._costs.get("servers") or {}).get(server) or self._costs.get("default") or (None, None)
        for fam, value in ((self.cost_per_hour, per_hour), (self.energy_price, per_kwh)):
            if value is None:
                fam.values.pop((server,), None)
            else:
                fam.values[(server,)] = float(value)
