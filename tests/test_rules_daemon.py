"""The real exporter with a user's rules: their series in /metrics, a broken rule set refused on SIGHUP with
the running rules kept, a good one applied without a restart."""

import json
import signal
import time

import yaml

from tests.helpers import Exporter, wait_until

# the seed article's lines (/work/shared/seed-article.txt)
UNLINKED = ("Aug 04 02:44:22 compute-server grandpa[572062]: (Worker_TP0 pid=264) INFO 08-04 02:44:22 "
            "[shared_offload_region.py:176] Unlinked mmap file /dev/shm/vllm_offload_f5388900-1119-46b2-b2eb-"
            "178e4b7e21c5.mmap after 2 workers mapped it\n")
B12X = ("(Worker_TP0 pid=496) WARNING [b12x_moe.py:810] B12X MoE force-A8 enabled: using quant_mode=w4a8_mx for E8M0 "
        "FP4 weights.\n")

WORKERS = {"name": "offload_workers", "pattern": r"Unlinked mmap file \S+ after (?P<workers>\d+) workers mapped it",
           "logger": "shared_offload_region.py", "fields": {"workers": "int"},
           "metrics": [{"name": "custom_offload_regions_total", "type": "counter"},
                       {"name": "custom_offload_region_workers", "type": "gauge", "value": "workers"}]}
QUANT = {"name": "quant_mode", "pattern": r"B12X MoE force-A8 enabled: using quant_mode=(?P<mode>\w+)",
         "metrics": [{"name": "custom_moe_quant_mode_info", "type": "gauge", "value": 1,
                      "labels": {"quant_mode": {"field": "mode", "max_values": 4}}}]}


def test_rules_series_and_sighup(tmp_path):
    log = tmp_path / "grandpa.log"
    log.write_text(UNLINKED)
    cfg = tmp_path / "config.yaml"
    sources = [{"name": "grandpa", "type": "file", "path": str(log), "from_start": True}]
    cfg.write_text(yaml.safe_dump({"sources": sources, "rules": [WORKERS]}))
    ex = Exporter("--config", str(cfg)).start()
    try:
        wait_until(lambda: ex.value("custom_offload_regions_total", server="grandpa") == 1, what="the rule's counter")
        assert ex.value("custom_offload_region_workers", server="grandpa") == 2
        assert ex.value("vllm_log_rule_lines_total", server="grandpa", rule="offload_workers") == 1

        # a broken rule: refused, the running rules go on counting
        broken = dict(WORKERS, metrics=[{"name": "custom_offload_regions", "type": "counter"}])
        cfg.write_text(yaml.safe_dump({"sources": sources, "rules": [broken, QUANT]}))
        ex.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        with log.open("a") as f:
            f.write(UNLINKED + B12X)
        wait_until(lambda: ex.value("custom_offload_regions_total", server="grandpa") == 2, what="old rules on")
        assert ex.value("custom_moe_quant_mode_info") is None

        # a good rule set: applied at once, the counter declared alike goes on
        cfg.write_text(yaml.safe_dump({"sources": sources, "rules": [WORKERS, QUANT]}))
        ex.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: ex.value("vllm_log_rule_lines_total", server="grandpa", rule="quant_mode") == 0,
                   what="the new rule loaded")
        with log.open("a") as f:
            f.write(B12X)
        wait_until(lambda: ex.value("custom_moe_quant_mode_info", server="grandpa", quant_mode="w4a8_mx") == 1,
                   what="the new rule's series")
        assert ex.value("custom_offload_regions_total", server="grandpa") == 2
    finally:
        err = ex.stop()
    events = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    refused = [e for e in events if e["event"] == "reload refused; running on as before"]
    assert len(refused) == 1
    assert refused[0]["error"] == (f"{cfg}: rules[0] (offload_workers).metrics[0].name: 'custom_offload_regions': "
                                   "a counter's name ends in _total")
    reloaded = [e for e in events if e["event"] == "reloaded (SIGHUP)"]
    assert len(reloaded) == 1 and reloaded[0]["applied"] == ["rules"]
