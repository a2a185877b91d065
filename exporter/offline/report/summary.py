"""What a run's statistics say, as the report's dict: exporter.offline.report.stats.RunStats collects
(one event at a time), :class:`Summary` (its base) turns what was collected into the figures that the
Markdown, JSON and HTML reports and ``compare`` show. Pure: no events, no I/O."""

from __future__ import annotations

from typing import Any

GB = 1e9  # rates are reported in GB/s (10^9), as PCIe is specified


class Summary:
    """The results half of RunStats: every method reads the attributes RunStats.__init__ sets."""

    # -- results --------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "range": {"first": self.first_ts, "last": self.last_ts, "starts": len(self.starts), "stops": len(self.stops)},
            "config": {**self._config(), "earlier": [dict(c) for c in self.earlier_configs]},
            "throughput": self._throughput(),
            "spec_decode": self._spec(),
            "kv_offload": self._offload(),
            "capacity": self._capacity(),
            "http": self._http(),
            "errors": {k: {"count": v[0], "first": v[1][0] if v[1] and v[1][0] != float("inf") else None,
                           "first_message": v[2]} for k, v in self.errors.items()},
            "ooms": sorted(self.ooms, key=lambda o: o["ts"] if o["ts"] is not None else float("inf")),
            "startup_failures": self.startup_failures,
            "stalls": self.stalls,
            "given_up": dict(sorted(self.given_up.items())),
            "request_log": self._request_log(),
            "steps": {b: {"count": n, "mean_seconds": total / n, "max_seconds": top}
                      for b, (n, total, top) in sorted(self.steps.items())},
        }
        if self.engine_ops:  # only when the run had such events: a report without them is unchanged
            out["engine_ops"] = self.engine_ops.summary()
        if self.rules is not None:  # only with rules: the report of a run without them is unchanged
            out["rules"] = self.rules.summary()
        return out

    def _config(self) -> dict:
        """The configuration of the last start in the log (``started``: when; None when the log holds
        no start of it); ``earlier``, in the summary's, each earlier start's, oldest first."""
        c = dict(self.facts)
        c["workers"] = {name: dict(w) for name, w in sorted(self.workers.items())}
        c["settings"] = dict(self.settings)
        c["started"] = self.config_started
        return c

    def _throughput(self) -> dict:
        hinges = self.single.hinges()
        nz_n, nz_sum = self.gen_nonzero
        return {
            "windows": self.gen_windows,
            "generation_peak": self.gen_peak,
            "single_request_windows": len(self.single),
            "single_request_median": self.single.median(),
            "single_request_iqr": list(hinges) if hinges else None,
            "nonzero_windows": nz_n,
            "nonzero_mean": nz_sum / nz_n if nz_n else None,
            "prompt_peak": self.prompt_peak,
            "gpu_kv_usage_peak": self.kv_usage_peak,
            "kv_cache_device": self.kv_device,
            "prefix_cache_hit_peak": self.prefix_hit,
            "external_prefix_cache_hit_peak": self.ext_prefix_hit,
            # generation throughput per number of running requests (1 is the single-request row above)
            "by_running": [{"running": n, "windows": len(x), "median": x.median(),
                            "iqr": list(x.hinges()) if len(x) else None}
                           for n, x in sorted(self.by_running.items())],
        }

    def _spec(self) -> dict:
        lens, ratios, tps = self.accept_len_values, self.accept_ratio_values, self.accepted_tps
        return {
            "windows": max(len(lens), len(ratios)),
            "depths": sorted(self.depths),
            "accepted_tokens": self.tokens["accepted"],
            "drafted_tokens": self.tokens["drafted"],
            # over the whole run, as vLLM defines them (its /metrics counters give the same):
            # 1 + accepted / drafts, accepted / drafted, drafted / drafts
            "drafts": self.tokens["drafts"],
            "run_acceptance_length": 1 + self.tokens["accepted"] / self.tokens["drafts"] if self.tokens["drafts"] else None,
            "run_draft_acceptance": self.tokens["accepted"] / self.tokens["drafted"] if self.tokens["drafted"] else None,
            "drafted_per_draft": self.tokens["drafted"] / self.tokens["drafts"] if self.tokens["drafts"] else None,
            "acceptance_length": {"median": lens.median(), "mean": lens.mean(), "best": lens.high},
            "draft_acceptance": {"median": ratios.median(), "mean": ratios.mean(), "best": ratios.high, "worst": ratios.low},
            "accepted_throughput": {"median": tps.median(), "best": tps.high},
            "per_position_mean": [total / n for n, total in self.per_position],
            # position 0 accepted / drafts that proposed a token: does not fall as (dynamic) drafts grow longer
            "first_token_acceptance": (self.tokens["first_accepted"] / self.tokens["first_drafts"]
                                       if self.tokens["first_drafts"] else None),
            "drafts_by_length": dict(sorted(self.draft_lengths.items())),
            "calibration": self._calibration(),
            # each per-window figure's windows and Tukey hinges, for telling a change from noise
            "spread": {name: {"windows": len(x), "iqr": list(x.hinges()) if len(x) else None}
                       for name, x in (("acceptance_length", lens), ("draft_acceptance", ratios),
                                       ("accepted_throughput", tps))},
        }

    def _calibration(self) -> list[dict] | None:
        """DSpark's confidence bins over the run: drafted and accepted tokens, and mean confidence."""
        if self.calibration is None:
            return None
        n = len(self.calibration)
        return [{"confidence": f"{i / n:.1f}-{(i + 1) / n:.1f}", "drafted": int(d), "accepted": int(a),
                 "acceptance": a / d if d else None, "mean_confidence": c / d if d else None}
                for i, (d, a, c) in enumerate(self.calibration)]

    def _offload(self) -> dict:
        out: dict[str, Any] = {}
        for d, xs in self.transfers.items():
            if not xs:
                out[d] = None
                continue
            big_b, big_s = xs.largest
            out[d] = {
                "intervals": xs.n,
                "bytes": xs.bytes,
                "seconds": xs.seconds,
                "weighted_gb_per_s": xs.bytes / xs.seconds / GB,
                "min_gb_per_s": xs.min_rate / GB,
                "max_gb_per_s": xs.max_rate / GB,
                "largest_interval": {"bytes": big_b, "ms": big_s * 1000, "gb_per_s": big_b / big_s / GB},
            }
        out["cpu_cache_usage_peak"] = self.cpu_cache_usage
        lm = self.lmcache
        if any(lm[d]["moves"] for d in ("store", "retrieve")) or lm["requested_tokens"]:
            out["lmcache"] = {d: dict(lm[d], gb_per_s=(lm[d]["bytes"] / lm[d]["seconds"] / GB) if lm[d]["seconds"] else None)
                              for d in ("store", "retrieve")}
            out["lmcache"]["requested_tokens"] = lm["requested_tokens"]
            out["lmcache"]["hit_tokens"] = lm["hit_tokens"]
            out["lmcache"]["hit_ratio"] = lm["hit_tokens"] / lm["requested_tokens"] if lm["requested_tokens"] else None
        return out

    def _capacity(self) -> dict:
        tokens = self.facts.get("gpu_kv_cache_tokens")
        kv_total = sum(w.get("kv_cache_bytes", 0) for w in self.workers.values()) or None
        max_len = self.facts.get("max_model_len") or self.facts.get("max_seq_len")
        out: dict[str, Any] = {"gpu_kv_tokens": tokens, "kv_cache_bytes_total": kv_total, "max_model_len": max_len}
        if not tokens:
            return out
        per_token = kv_total / tokens if kv_total else None
        out["kv_bytes_per_token"] = per_token
        peak = self.kv_usage_peak
        out["peak_kv_usage_tokens"] = round(peak * tokens) if peak is not None else None
        out["sequence_budget"] = [
            {"sequences": n, "tokens_each": min(tokens // n, max_len) if max_len else tokens // n} for n in (1, 2, 4, 8)
        ]
        pool = self.facts.get("offload_pool_bytes")
        if pool and per_token:
            eq = pool / per_token
            out["offload_pool"] = {"bytes": pool, "token_equivalents": eq,
                                   "max_length_histories": eq / max_len if max_len else None}
        return out

    def _said(self, key: str) -> list[str]:
        """What the starts' arguments said of ``key`` (exporter.parsers.startup: access_log, request_log)."""
        return [c[key] for c in (*self.earlier_configs, self.facts) if c.get(key)]

    def _request_log(self) -> dict:
        out: dict[str, Any] = {k: dict(sorted(v.items(), key=lambda kv: -kv[1])) for k, v in self.request_log.items() if v}
        if not out and "on" not in self._said("request_log"):
            # absent, not none: what the log cannot hold is not counted as 0
            out["why_empty"] = ("no request-log record in this range: vLLM logs requests, aborts and responses only "
                                "with --enable-log-requests (and --enable-log-outputs; before 0.10.2, unless "
                                "--disable-log-requests)")
        return out

    def _http(self) -> dict:
        total = sum(self.http_status.values())
        off = self._said("access_log")
        if not total and off:
            how = "--disable-uvicorn-access-log" if "flag" in off else "--uvicorn-log-level above info"
            return {"responses": None, "by_status": {}, "share_200": None, "by_endpoint": [],
                    "why_empty": f"the access log was off ({how}): vLLM logged none of its HTTP responses"}
        return {
            "responses": total,
            "by_status": dict(sorted(self.http_status.items())),
            "share_200": self.http_status.get(200, 0) / total if total else None,
            "by_endpoint": [{"method": m, "path": p, "count": n}
                            for (m, p), n in sorted(self.http_endpoint.items(), key=lambda kv: (-kv[1], kv[0]))],
        }
