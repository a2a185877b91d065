"""Cost per token: recording rules that divide what running a server costs per hour by the tokens it
served in the last hour, per server and model, and the Overview's Cost row.

- ``vllm_log:energy_cost_per_hour`` (per host): DCGM's power of the host's GPUs (``DCGM_FI_DEV_POWER_USAGE``,
  watts) times the configured price per kWh; only where DCGM is scraped with the exporter's ``host``;
- ``vllm_log:cost_per_hour``: the configured price per hour (``vllm_log_cost_per_hour``, the exporter's
  config) plus the server's share of its host's energy (split evenly among the host's priced servers);
- ``vllm_log:generated_tokens:increase1h``, ``vllm_log:prompt_tokens:increase1h``: tokens served, labelled
  ``source``: ``vllm`` (vLLM's own ``vllm:generation_tokens_total`` and ``vllm:prompt_tokens_total``, where
  its /metrics is scraped) or else ``log`` (the log's stats windows: ``vllm_log_generation_tokens_total``
  and ``vllm_log_computed_prompt_tokens_total``, each window's average throughput times its length; the
  log's prompt tokens leave out prefix-cache hits since vLLM 0.16, so its price per prompt token is higher);
- ``vllm_log:cost_per_million_generated_tokens``, ``vllm_log:cost_per_million_prompt_tokens``: the price per
  hour over the tokens of the hour, per million (absent when no token was served: no price per nothing).
"""

from __future__ import annotations

from mixin import config as C
from mixin.board import GOOD, NEUTRAL, Board
from mixin.slo import BY

V = C.VLLM_SELECTOR
W = C.COST_WINDOW
HOST = "cluster, host"
# (what, vLLM's counter, the log's counter)
TOKENS = {"generated": ("vllm:generation_tokens_total", "vllm_log_generation_tokens_total"),
          "prompt": ("vllm:prompt_tokens_total", "vllm_log_computed_prompt_tokens_total")}
# comments the rendered rules file carries above these rules (mixin/build.py)
COMMENTS = {
    f"vllm_log:generated_tokens:increase{W}":
        "Tokens served in the window, by server and model. source=\"vllm\": vLLM's own counters, where its "
        "/metrics is scraped (job " + C.VLLM_JOB + "); source=\"log\": the log's stats windows (average "
        "throughput x window length), for servers whose /metrics is not.",
    f"vllm_log:prompt_tokens:increase{W}":
        "The same for prompt tokens. The log's count (vllm_log_computed_prompt_tokens_total) is the prompt "
        "tokens the engine computed: since vLLM 0.16 it leaves out prefix-cache hits, vLLM's counts them.",
    "vllm_log:cost_per_hour":
        "The configured price per hour (vllm_log_cost_per_hour, the exporter's cost section) plus the server's "
        "share of its host's GPU energy (DCGM's power x per_kwh), where DCGM is scraped with the same host label.",
}


def _model(expr: str) -> str:
    return f'label_replace({expr}, "model", "$1", "model_name", "(.+)")'


def _source(expr: str, source: str) -> str:
    return f'label_replace({expr}, "source", "{source}", "", "")'


def tokens(what: str) -> str:
    native, log = TOKENS[what]
    from_vllm = f"sum by ({BY}, model) ({_model(f'increase({native}{{{V}}}[{W}])')})"
    from_log = f"sum by ({BY}) (increase({log}[{W}]))"
    named = f"{from_log} * on ({BY}) group_left (model) max by ({BY}, model) (vllm_log_model_info)"
    return (f"{_source(from_vllm, 'vllm')}\n"
            f"  or ({_source(f'({named}) or ({from_log} unless on ({BY}) vllm_log_model_info)', 'log')}\n"
            f"      unless on ({BY}) {from_vllm})")


def groups() -> list[dict]:
    priced = f"max by ({BY}) (vllm_log_cost_per_hour)"
    rules: list[dict] = [
        {"record": "vllm_log:energy_cost_per_hour",
         "expr": f'sum by ({HOST}) ({C.DCGM_POWER}{{host!=""}}) / 1000\n'
                 f"  * on ({HOST}) group_left max by ({HOST}) (vllm_log_energy_price_per_kwh)"},
        {"record": "vllm_log:cost_per_hour",
         "expr": f"{priced}\n  + on ({HOST}) group_left () (vllm_log:energy_cost_per_hour\n"
                 f"    / on ({HOST}) count by ({HOST}) ({priced}))\n  or {priced}"},
    ]
    for what in TOKENS:
        rules.append({"record": f"vllm_log:{what}_tokens:increase{W}", "expr": tokens(what)})
    for what in TOKENS:
        rules.append({"record": f"vllm_log:cost_per_million_{what}_tokens",
                      "expr": f"vllm_log:cost_per_hour\n  / on ({BY}) group_right () "
                              f"(vllm_log:{what}_tokens:increase{W} / 1e6 > 0)"})
    return [{"name": "vllm-log-cost", "rules": rules}]


# the cost rules keep config.SLO_BY's labels (no job, no instance)
R = 'cluster=~"$cluster", host=~"$host", server=~"$server"'


def cost_row(b: Board) -> None:
    b.row("Cost (your prices over the tokens served)")
    for what in TOKENS:
        b.stat(f"Cost per 1 M {what} tokens", [
            (f"vllm_log:cost_per_million_{what}_tokens{{{R}}}", "{{server}} {{model}} ({{source}})")], "none",
            w=8, decimals=2, steps=[(None, NEUTRAL)],
            description=f"What the server cost in the last {W} over the {what} tokens it served in it, per million, "
                        f"in the currency of the exporter's cost section (vllm_log:cost_per_million_{what}_tokens). "
                        "The tokens: vLLM's own counters where its /metrics is scraped (source vllm), else the log's "
                        "stats windows (source log)" + (", whose prompt tokens leave out prefix-cache hits"
                                                        if what == "prompt" else "") + ". Empty without a price "
                        "or without tokens.")
        b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = "no price configured, or no token served"
    b.stat("Cost per hour", [(f"vllm_log:cost_per_hour{{{R}}}", "{{server}}")], "none", w=8, decimals=2,
           steps=[(None, GOOD)],
           description="The configured price per hour (cost: per_hour, or gpu_hour x gpus) plus the server's share "
                       "of its host's GPU energy where DCGM is scraped and per_kwh is set (vllm_log:cost_per_hour).")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = "no price configured"
