"""The series of a user's rules (exporter.config.rules): each rule's ``rule`` events feed the counters, gauges
and histograms it declares, with labels from its fields bounded as ours are. Knows the rules only as the
checked specs it is given (their metrics: name, type, value, help, labels, buckets).

Emitted, besides the rules' own series (each with ``server``):
    vllm_log_rule_lines_total{rule} (lines each rule matched; at 0 from the start),
    vllm_log_rule_invalid_values_total{rule,field} (a captured text that was no number, or a unit the rule
    does not know: that value is left out, the line still counts),
    vllm_log_rule_label_overflow_total{metric,label} (label values beyond the rule's bound, counted as
    `other`)
These three exist only while rules are loaded.

A metric is updated only when the line gave every field it reads (a value or a label): what the log did
not say is absent, not zero. Rule gauges are dropped when the server starts again, like ours; counters and
histograms stay. A label's first ``max_values`` values are kept per server for the exporter's life (a
restart of vLLM does not make room for more), so a rule's series stay bounded however long it runs.
"""

from __future__ import annotations

from exporter.parsers.rules import line_value

OTHER = "other"


class _Feed:
    """One metric as one rule feeds it."""

    __slots__ = ("metric", "kind", "family", "value", "labels")

    def __init__(self, metric, family):
        self.metric = metric.name
        self.kind = metric.type
        self.family = family
        self.value = metric.value  # a field's name, a constant, or None (1 per line)
        # (label name, field, kept values or None, max_values or None)
        self.labels = tuple((lb.name, lb.field, frozenset(lb.values) if lb.values is not None else None, lb.max_values)
                            for lb in metric.labels)


class RuleMetrics:
    """Part of exporter.metrics.Metrics: the rules' series, set (and replaced on a reload) by ``set_rules``."""

    def _declare_rules(self) -> None:
        self._rule_feeds: dict[str, tuple[_Feed, ...]] = {}
        self._rule_families: dict[str, tuple[tuple, object]] = {}  # metric name -> (shape, family)
        self._rule_seen: dict[tuple[str, str, str], set[str]] = {}  # (server, metric, label) -> values kept
        self._rule_counters: dict[str, list] = {}  # rule -> families of its label-less counters
        self.rule_lines = self.rule_invalid = self.rule_overflow = None

    def set_rules(self, specs) -> None:
        """Make the series of ``specs`` (exporter.config.rules.RuleSpec), replacing the rules before: a metric
        declared as before keeps its series (counters go on across a reload), one that changed starts anew,
        one no rule feeds any more is gone."""
        if specs and self.rule_lines is None:
            c = self._counter
            self.rule_lines = c("vllm_log_rule_lines", "Lines each of your rules matched (exporter.config.rules).",
                                ["server", "rule"])
            self.rule_invalid = c("vllm_log_rule_invalid_values", "Values a rule captured that were no number (or "
                                  "named a unit it does not know): left out; the line still counts.",
                                  ["server", "rule", "field"])
            self.rule_overflow = c("vllm_log_rule_label_overflow", "Label values of a rule's metric beyond the "
                                   "rule's bound, counted as `other`.", ["server", "metric", "label"])
        table = self._table
        families: dict[str, tuple[tuple, object]] = {}
        feeds: dict[str, tuple[_Feed, ...]] = {}
        counters: dict[str, list] = {}
        for spec in specs:
            mine = []
            for m in spec.metrics:
                shape = (m.type, tuple(lb.name for lb in m.labels), m.buckets)
                fam = families.get(m.name, (None, None))[1]
                if fam is None:
                    old = self._rule_families.get(m.name)
                    if old is not None and old[0] == shape:
                        fam = old[1]
                        fam.doc = m.help
                    else:
                        names = ["server"] + [lb.name for lb in m.labels]
                        if m.type == "counter":
                            fam = table.counter(m.family, m.help, names)
                        elif m.type == "gauge":
                            fam = table.gauge(m.family, m.help, names)
                        else:
                            fam = table.histogram(m.family, m.help, names, m.buckets)
                    families[m.name] = (shape, fam)
                mine.append(_Feed(m, fam))
                if m.type == "counter" and not m.labels:
                    counters.setdefault(spec.name, []).append(fam)
            feeds[spec.name] = tuple(mine)
        for name, (_shape, fam) in self._rule_families.items():
            if families.get(name, (None, None))[1] is not fam:
                table.families.remove(fam)
                for key in [k for k in self._rule_seen if k[1] == name]:
                    del self._rule_seen[key]
        if self.rule_lines is not None:
            for fam in (self.rule_lines, self.rule_invalid):
                for labels in [k for k in fam.values if k[1] not in feeds]:
                    del fam.values[labels]
            for labels in [k for k in self.rule_overflow.values if k[1] not in families]:
                del self.rule_overflow.values[labels]
        self._rule_families, self._rule_feeds, self._rule_counters = families, feeds, counters
        if not specs and self.rule_lines is not None:  # no rules any more: their bookkeeping goes too
            for fam in (self.rule_lines, self.rule_invalid, self.rule_overflow):
                table.families.remove(fam)
            self.rule_lines = self.rule_invalid = self.rule_overflow = None
        for server in self._servers:
            self._touch_rules(server)

    def _touch_rules(self, server: str) -> None:
        if self.rule_lines is None:
            return
        for rule in self._rule_feeds:
            self.rule_lines.touch((server, rule))
        for fams in self._rule_counters.values():
            for fam in fams:
                fam.touch((server,))

    def _forget_rule_labels(self, server: str) -> None:
        for key in [k for k in self._rule_seen if k[0] == server]:
            del self._rule_seen[key]

    def _on_rule(self, server, ev, f):
        rule = f.get("rule")
        feeds = self._rule_feeds.get(rule)
        if feeds is None:  # a rule no longer loaded (its line was read before a reload)
            return
        self.rule_lines.inc((server, rule))
        for field in f.get("_invalid", ()):
            self.rule_invalid.inc((server, rule, field))
        for feed in feeds:
            self._feed_rule(server, rule, feed, f)

    def _feed_rule(self, server: str, rule: str, feed: _Feed, f: dict) -> None:
        labels = [server]
        for name, field, kept, cap in feed.labels:
            v = f.get(field)
            if v is None:
                return  # the line did not give it: nothing to say
            v = str(v)
            if kept is not None:
                if v not in kept:
                    v = OTHER
                    self.rule_overflow.inc((server, feed.metric, name))
            else:
                seen = self._rule_seen.get((server, feed.metric, name))
                if seen is None:
                    seen = self._rule_seen[(server, feed.metric, name)] = set()
                if v not in seen:
                    if len(seen) < cap and v != OTHER:
                        seen.add(v)
                    else:
                        v = OTHER
                        self.rule_overflow.inc((server, feed.metric, name))
            labels.append(v)
        key = tuple(labels)
        value = feed.value
        x = line_value(value, f)
        if x is None:
            return
        if feed.kind == "counter":
            if x < 0:
                self.rule_invalid.inc((server, rule, value if isinstance(value, str) else "value"))
                return
            feed.family.inc(key, x)
        elif feed.kind == "gauge":
            feed.family.values[key] = float(x)
        else:
            feed.family.observe(key, float(x))
