#!/usr/bin/env python3
"""Tests of papers/matched-reads.py's judging of a compare keep-up report.

Usage: python3 papers/test_matched_reads.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generator import load_script  # noqa: E402

matched_reads = load_script("matched-reads.py")


def row(strategy, fast_path, backlog, mode="keepup"):
    return {"strategy": strategy, "fast_path": fast_path, "mode": mode,
            "backlog_at_end": backlog, "events": 40_000}


def ratio(gate, quantile, median, low, high):
    return {"name": f"{gate} fast keep-up read {quantile} vs upstream-1.6.1",
            "median": median, "range": [low, high], "repeats": 15}


REPORT = {
    "rows": [row("rwlock", True, 3), row("rwlock", False, 3), row("seqlock", True, 900),
             row("epoch-seize", True, 2), row("upstream-1.6.1", None, 4),
             row("upstream-1.6.1", None, 0, mode="capacity")],
    "ratios": [ratio("rwlock", "p50", 0.78, 0.6, 1.2), ratio("rwlock", "p99", 0.64, 0.5, 1.0),
               ratio("seqlock", "p50", 0.77, 0.5, 1.3), ratio("seqlock", "p99", 0.81, 0.3, 1.0),
               ratio("epoch-seize", "p50", 0.98, 0.7, 1.5)],
}


class Judge(unittest.TestCase):
    def setUp(self):
        self.gates, self.upstream_kept_up = matched_reads.judge(REPORT)
        self.by_gate = {g["gate"]: g for g in self.gates}

    def test_both_medians_within_the_bound_is_met(self):
        rwlock = self.by_gate["rwlock"]
        self.assertEqual((rwlock["p50"], rwlock["p99"]), ([0.78, 0.6, 1.2], [0.64, 0.5, 1.0]))
        self.assertEqual(rwlock["verdict"], "met")

    def test_one_median_over_the_bound_is_missed(self):
        self.assertEqual(self.by_gate["seqlock"]["verdict"], "missed")

    def test_a_backlog_over_one_percent_is_not_kept_up(self):
        self.assertFalse(self.by_gate["seqlock"]["kept_up"])
        self.assertTrue(self.by_gate["rwlock"]["kept_up"])
        self.assertTrue(self.upstream_kept_up)

    def test_a_gate_without_both_ratios_or_a_row_is_left_out(self):
        self.assertEqual(sorted(self.by_gate), ["rwlock", "seqlock"])

    def test_the_table_names_each_gate_once(self):
        text = matched_reads.markdown({"revision": "abc"}, [
            {"workload": "chat", "rate": 200_000, "upstream_kept_up": False,
             "gates": self.gates}])
        cells = "| chat | 200,000 | rwlock | 0.78× (0.60–1.20) | 0.64× (0.50–1.00) |"
        self.assertIn(cells, text)
        self.assertIn("Upstream fell behind (its ratios then compare a queueing reader): "
                      "chat at 200,000.", text)


if __name__ == "__main__":
    unittest.main()
