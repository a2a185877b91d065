"""What speculative decoding's lines say, per engine.

Emitted (label ``engine`` as for the stats windows):
    vllm_log_spec_decode_accepted_tokens_total, vllm_log_spec_decode_drafted_tokens_total,
    vllm_log_spec_decode_drafts_total (every draft, those of length 0 too: exact from a draft length
    histogram, else derived from the window's rates, see parsers.spec_decode.drafts_of),
    vllm_log_spec_decode_drafts_by_length_total{draft_length} (0-32; only lines with vLLM's draft
    length histogram, i.e. dynamic draft lengths),
    vllm_log_spec_decode_position_accepted_tokens_total{position} (accepted tokens at each draft
    position: the window's rate x its drafts; position 0 over drafts of length 1 or more is the
    acceptance that does not fall as the draft length grows),
    vllm_log_spec_decode_mean_acceptance_length, vllm_log_spec_decode_draft_acceptance_ratio,
    vllm_log_spec_decode_position_acceptance_ratio{position}, vllm_log_spec_decode_depth,
    vllm_log_spec_decode_window_mean_acceptance_length (histogram),
    vllm_log_spec_decode_window_draft_acceptance_ratio (histogram),
    vllm_log_spec_decode_confidence_drafted_tokens_total{confidence},
    vllm_log_spec_decode_confidence_accepted_tokens_total{confidence},
    vllm_log_spec_decode_confidence_sum_total{confidence} (DSpark's calibration bins, summed over
    positions: per bin of the drafter's own confidence, what it drafted, what was accepted and the
    confidences' sum; accepted / drafted against sum / drafted is its reliability curve),
    vllm_log_diffusion_committed_tokens_total, vllm_log_diffusion_denoising_steps_total,
    vllm_log_diffusion_canvas_positions_total (a diffusion language model's decoding, 0.24+: tokens committed,
    denoising steps run and canvas positions evaluated; committed over steps is tokens per denoising step)
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.metrics.labels import POSITIONS, engine_label
from exporter.parsers.spec_decode import drafts_of

ACCEPTANCE_LENGTH_BUCKETS = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0, 8.0, 10.0, 16.0)
RATIO_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 1.0)
DRAFT_LENGTHS = tuple(str(i) for i in range(33))
MAX_CONFIDENCE_BINS = 20


def confidence_bins(n: int) -> tuple[str, ...] | None:
    """The labels of ``n`` equal confidence bins over 0-1 ("0.0-0.1" ... "0.9-1.0"), None beyond the bound."""
    if not isinstance(n, int) or not 0 < n <= MAX_CONFIDENCE_BINS:
        return None
    digits = 1 if 10 % n == 0 else 2
    return tuple(f"{i / n:.{digits}f}-{(i + 1) / n:.{digits}f}" for i in range(n))


class SpecDecodeMetrics:
    """Part of exporter.metrics.Metrics: speculative decoding."""

    def _declare_spec_decode(self, SE: list[str]) -> None:
        c, w, h = self._counter, self._gauge, self._table.histogram
        self.spec_accepted = c("vllm_log_spec_decode_accepted_tokens", "Draft tokens accepted.", SE)
        self.spec_drafted = c("vllm_log_spec_decode_drafted_tokens", "Draft tokens proposed.", SE)
        self.spec_mean_len = w("vllm_log_spec_decode_mean_acceptance_length", "Mean acceptance length of the last window (includes the bonus token).", SE)
        self.spec_ratio = w("vllm_log_spec_decode_draft_acceptance_ratio", "Draft acceptance rate of the last window "
                            "(accepted / drafted tokens, 0-1). With dynamic draft lengths it falls as drafts grow "
                            "longer, by arithmetic: position 0's acceptance does not.", SE)
        self.spec_drafts = c("vllm_log_spec_decode_drafts", "Drafts (one per request per step, those of length 0 too): "
                             "the sum of the line's draft length histogram when it has one, else derived from each "
                             "window's line: accepted / (sum of the per-position rates), or / (mean acceptance "
                             "length - 1) without them. vLLM's own is "
                             "vllm:spec_decode_num_drafts_total. Run-level mean acceptance length = 1 + accepted / drafts.", SE)
        self.spec_drafts_by_length = c("vllm_log_spec_decode_drafts_by_length", "Drafts by their length in tokens, from "
                                       "the line's draft length histogram (dynamic draft lengths; 0: the drafter "
                                       "proposed nothing). vLLM's own is "
                                       "vllm:spec_decode_num_drafts_by_draft_length_total.", SE + ["draft_length"])
        self.spec_pos_accepted = c("vllm_log_spec_decode_position_accepted_tokens", "Accepted draft tokens at each "
                                   "position, as the window's per-position rate x its drafts (vLLM's own is "
                                   "vllm:spec_decode_num_accepted_tokens_per_pos_total). Position 0 / drafts of length "
                                   ">= 1 is how often the first drafted token is right, whatever the draft length.",
                                   SE + ["position"])
        self.spec_depth = w("vllm_log_spec_decode_depth", "Configured speculative depth: the most draft tokens proposed "
                            "per step (a custom build's 'Current speculative depth', else the number of per-position "
                            "rates). Drafted tokens / drafts gives what was proposed on average.", SE)
        self.spec_pos = w("vllm_log_spec_decode_position_acceptance_ratio", "Acceptance rate per draft position in the last window (0-1).", SE + ["position"])
        self.spec_len_hist = h("vllm_log_spec_decode_window_mean_acceptance_length", "Per-window mean acceptance length.", SE,
                               ACCEPTANCE_LENGTH_BUCKETS)
        self.spec_ratio_hist = h("vllm_log_spec_decode_window_draft_acceptance_ratio", "Per-window draft acceptance rate (0-1).", SE,
                                 RATIO_BUCKETS)
        CB = SE + ["confidence"]
        self.diff_committed = c("vllm_log_diffusion_committed_tokens", "Diffusion decoding (0.24+): tokens committed "
                                "to the output ('DiffusionDecoding metrics: ... Committed: N tokens').", SE)
        self.diff_steps = c("vllm_log_diffusion_denoising_steps", "Diffusion decoding: denoising steps run (committed "
                            "tokens over these: tokens per step, the parallelism the model got).", SE)
        self.diff_positions = c("vllm_log_diffusion_canvas_positions", "Diffusion decoding: canvas positions evaluated "
                                "(committed tokens over these: the share of the compute that became output).", SE)
        self.conf_drafted = c("vllm_log_spec_decode_confidence_drafted_tokens", "DSpark: drafted tokens by the "
                              "drafter's own confidence (its STS calibration bins, all positions).", CB)
        self.conf_accepted = c("vllm_log_spec_decode_confidence_accepted_tokens", "DSpark: accepted tokens by the "
                               "drafter's confidence; / the drafted ones is the acceptance each confidence earned.", CB)
        self.conf_sum = c("vllm_log_spec_decode_confidence_sum", "DSpark: the sum of the drafter's confidences in each "
                          "bin; / the drafted tokens is the bin's mean confidence (calibrated: equal to its acceptance).", CB)
        self._position_keys: dict[tuple[str, str], list[tuple[str, str, str]]] = {}

    def _on_diffusion_decoding(self, server: str, ev: Event, f: dict) -> None:
        key = (server, engine_label(f.get("engine", 0)) or self._overflow(server, "engine"))
        for fam, name in ((self.diff_committed, "committed_tokens"), (self.diff_steps, "denoising_steps"),
                          (self.diff_positions, "canvas_positions")):
            c = fam.values
            c[key] = c.get(key, 0.0) + max(0, f[name])

    def _on_spec_decode(self, server: str, ev: Event, f: dict) -> None:
        eng = engine_label(f.get("engine", 0)) or self._overflow(server, "engine")
        key = (server, eng)
        acc, dra = f.get("accepted_tokens"), f.get("drafted_tokens")
        c = self.spec_accepted.values
        c[key] = c.get(key, 0.0) + max(0, acc or 0)
        c = self.spec_drafted.values
        c[key] = c.get(key, 0.0) + max(0, dra or 0)
        drafts = drafts_of(f)
        if drafts:
            c = self.spec_drafts.values
            c[key] = c.get(key, 0.0) + drafts
        mean_len = f.get("mean_acceptance_length")
        if mean_len is not None:
            self.spec_mean_len.values[key] = float(mean_len)
            self.spec_len_hist.observe(key, mean_len)
        ratio = f.get("draft_acceptance_rate")
        if ratio is None and acc is not None and dra:
            ratio = acc / dra
        if ratio is not None:
            self.spec_ratio.values[key] = float(ratio)
            self.spec_ratio_hist.observe(key, ratio)
        per_pos = f.get("per_position_acceptance_rate") or []
        depth = f.get("speculative_depth") or (len(per_pos) or None)
        if depth is not None:
            self.spec_depth.values[key] = float(depth)
        # Positions are bounded by the depth vLLM was configured with (a handful, at most ~16).
        values = self.spec_pos.values
        keys = self._position_keys.get(key)
        if keys is None:
            keys = self._position_keys[key] = [(server, eng, p) for p in POSITIONS]
        for k, v in zip(keys, per_pos):
            values[k] = float(v)
        if len(per_pos) > len(keys):
            self._overflow(server, "position", len(per_pos) - len(keys))
        if drafts:
            c = self.spec_pos_accepted.values
            for k, v in zip(keys, per_pos):
                c[k] = c.get(k, 0.0) + round(v * drafts)
        hist = f.get("draft_length_histogram")
        if hist:
            c = self.spec_drafts_by_length.values
            for length, n in hist.items():
                label = DRAFT_LENGTHS[length] if 0 <= length < len(DRAFT_LENGTHS) else self._overflow(server, "position")
                k = (server, eng, label)
                c[k] = c.get(k, 0.0) + n

    def _on_spec_calibration(self, server: str, ev: Event, f: dict) -> None:
        eng = engine_label(f.get("engine", 0)) or self._overflow(server, "engine")
        labels = confidence_bins(f.get("bins"))
        if labels is None:
            self._overflow(server, "confidence")
            return
        for fam, rows in ((self.conf_drafted, f.get("counts")), (self.conf_accepted, f.get("accepted")),
                          (self.conf_sum, f.get("confidence_sums"))):
            c = fam.values
            for row in rows or ():
                for label, v in zip(labels, row):
                    k = (server, eng, label)
                    c[k] = c.get(k, 0.0) + float(v)
