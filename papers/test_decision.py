#!/usr/bin/env python3
"""Tests of papers/decision.py's parsers.

Usage: python3 papers/test_decision.py   (or python3 -m unittest from papers/)
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decision  # noqa: E402

TABLE = """# Targets

Prose that says met or missed is not a cell | met | of a table.

| workload | lane CPU | capacity | reader p99 |
|---|---|---|---|
| agentx | met | missed | met |
| chat | missed | missed | — |
|mooncake|met|missed|
"""


class VerdictCells(unittest.TestCase):
    def test_adjacent_cells_are_all_counted(self):
        self.assertEqual(
            decision.verdict_cells(TABLE),
            ["met", "missed", "met", "missed", "missed", "met", "missed"],
        )

    def test_only_whole_cells_count(self):
        table = "| metric | verdict |\n|---|---|\n| met target | missed by 2× |\n"
        self.assertEqual(decision.verdict_cells(table), [])

    def test_the_results_file_has_a_verdict_in_every_target_row(self):
        path = os.path.join(decision.RESULTS, "targets.md")
        if not os.path.exists(path):
            self.skipTest("no papers/results/targets.md")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        naive = text.count("| met |") + text.count("| missed |")
        self.assertGreaterEqual(len(decision.verdict_cells(text)), naive)


def keepup_row(p50, p99, backlog=0):
    return {str(decision.MATCHED_RATE): {
        "read_p50_ns": p50, "read_p99_ns": p99, "backlog_at_end": backlog, "events": 1000}}


class KeepupReaders(unittest.TestCase):
    def curves(self, upstream_backlog=0):
        return {"rows": {
            decision.UPSTREAM: keepup_row(500, 1000, upstream_backlog),
            "rwlock": keepup_row(400, 1000),
            "epoch-seize": keepup_row(450, 900),
        }}

    def test_ratios_and_bounds_per_gate(self):
        readers = decision.keepup_readers(self.curves())
        self.assertEqual(readers["rwlock"], (0.8, 1.0, decision.READ_BOUND))
        self.assertEqual(readers["epoch-seize"], (0.9, 0.9, decision.EPOCH_READ_BOUND))
        self.assertNotIn("seqlock", readers)

    def test_no_verdict_where_upstream_saturated(self):
        self.assertEqual(decision.keepup_readers(self.curves(upstream_backlog=11)), {})
        self.assertEqual(decision.keepup_readers(None), {})


class ReadOnlyClause(unittest.TestCase):
    def test_a_workload_meets_only_when_every_gate_meets_at_both_percentiles(self):
        text = decision.read_only_clause({
            "agentx": ([0.9, 1.0], [0.7, 0.8]),
            "mooncake": ([0.4, 0.5], [0.6, 0.8]),
        })
        self.assertTrue(text.startswith("The reader beats upstream on mooncake, not on agentx:"))
        self.assertIn("agentx 0.90–1.00× / 0.70–0.80× (missed)", text)
        self.assertIn("mooncake 0.40–0.50× / 0.60–0.80× (met)", text)

    def test_the_lead_says_all_or_none(self):
        self.assertTrue(decision.read_only_clause({"chat": ([0.5], [0.5])})
                        .startswith("The reader beats upstream on every workload:"))
        self.assertTrue(decision.read_only_clause({"chat": ([0.5], [0.81])})
                        .startswith("The reader is where crtc does not beat upstream:"))


def gate(name, p50, p99, verdict):
    return {"gate": name, "p50": [p50, p50 - 0.2, p50 + 0.2], "p99": [p99, p99 - 0.2, p99 + 0.2],
            "repeats": 15, "kept_up": True, "bound": 0.8, "verdict": verdict}


class MatchedClause(unittest.TestCase):
    MATCHED = {"meta": {"revision": "abc"}, "results": [
        {"workload": "chat", "rate": 200_000, "upstream_kept_up": True,
         "gates": [gate("rwlock", 0.85, 0.85, "missed"), gate("seqlock", 0.86, 1.02, "missed")]},
        {"workload": "agentx", "rate": 300_000, "upstream_kept_up": True,
         "gates": [gate("rwlock", 0.78, 0.64, "met")]},
        {"workload": "trace", "rate": 100_000, "upstream_kept_up": True, "gates": []},
    ]}

    def test_each_workload_lists_its_gates_and_is_judged_on_all_of_them(self):
        text = decision.matched_clause(self.MATCHED)
        self.assertIn("chat at 200,000 events/s rwlock 0.85× / 0.85×, seqlock 0.86× / 1.02×",
                      text)
        self.assertIn("agentx at 300,000 events/s rwlock 0.78× / 0.64×", text)
        self.assertIn("met on agentx; missed on chat)", text)
        self.assertNotIn("trace", text)

    def test_the_sentence_prefers_the_paired_file_to_the_curves(self):
        ratios = [{"name": f"{option[1]} fast read-only {q} vs {decision.UPSTREAM}",
                   "median": 0.5} for option in decision.OPTIONS[:-1] for q in ("p50", "p99")]
        compare = {w: {"ratios": ratios} for w in decision.WORKLOADS}
        curves = {"rows": {}}
        text = decision.reader_sentence(
            {"compare": compare, "matched": self.MATCHED, "keepup": curves})
        self.assertIn("results/matched-reads.md", text)
        self.assertNotIn("results/keepup.md", text)
        without = decision.reader_sentence({"compare": compare, "matched": None, "keepup": None})
        self.assertNotIn("matched-reads", without)


if __name__ == "__main__":
    unittest.main()
