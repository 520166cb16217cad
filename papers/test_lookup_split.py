#!/usr/bin/env python3
"""Tests of papers/lookup-split.py's parser and table.

Usage: python3 papers/test_lookup_split.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generator import load_script  # noqa: E402

lookup_split = load_script("lookup-split.py")

REPORT = """chat (8934 lookups), our fast path: 31 rounds of 5 passes
  ours            392.5 ns/lookup (350.8-487.5)
  upstream        356.0 ns/lookup (298.2-437.6)
  ours-map        110.1 ns/lookup (107.5-118.2)
  upstream-map    107.9 ns/lookup (106.0-120.7)
  ours / upstream: 1.147 (0.960-1.319), paired per round
  ours-map / upstream: 0.307 (0.270-0.366), paired per round
  upstream-map / upstream: 0.315 (0.262-0.365), paired per round
  walk: (ours - ours-map) / (upstream - upstream-map): 1.197 (0.939-1.457), paired per round
"""


class Parse(unittest.TestCase):
    def test_every_stage_and_ratio_is_read(self):
        report = lookup_split.parse(REPORT)
        self.assertEqual(report["lookups"], 8934)
        self.assertEqual(report["stages"]["ours"], [392.5, 350.8, 487.5])
        self.assertEqual(report["stages"]["upstream-map"], [107.9, 106.0, 120.7])
        self.assertEqual(report["ratios"]["lookup"], [1.147, 0.960, 1.319])
        self.assertEqual(report["ratios"]["walk"], [1.197, 0.939, 1.457])

    def test_a_ratio_rust_prints_as_negative_or_nan_is_read(self):
        odd = REPORT.replace("1.197 (0.939-1.457)", "NaN (-0.250-inf)")
        walk = lookup_split.parse(odd)["ratios"]["walk"]
        self.assertNotEqual(walk[0], walk[0])  # NaN
        self.assertEqual(walk[1:], [-0.25, float("inf")])

    def test_a_missing_line_is_an_error_not_a_gap(self):
        truncated = "\n".join(line for line in REPORT.splitlines() if "walk" not in line)
        with self.assertRaises(ValueError):
            lookup_split.parse(truncated)


class Table(unittest.TestCase):
    def test_a_row_shows_medians_with_their_ranges(self):
        row = {"gate": "rwlock", **lookup_split.parse(REPORT)}
        text = lookup_split.markdown({"revision": "abc"}, [
            {"workload": "chat", "lookups": row["lookups"], "rows": [row]}])
        self.assertIn("## chat (8,934 lookups)", text)
        self.assertIn("| rwlock | 392 (351–488) |", text)
        self.assertIn("1.20× (0.94–1.46) |", text)


if __name__ == "__main__":
    unittest.main()
