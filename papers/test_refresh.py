#!/usr/bin/env python3
"""Tests of papers/refresh.py on a temporary git repository: a results file
regenerated at a new revision, and prose citing the old one.

Usage: python3 papers/test_refresh.py
"""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_figures as cf  # noqa: E402
import refresh  # noqa: E402

TABLE = """# Targets

- revision: {rev}

## Lane CPU per event vs upstream

| workload | row | ns/event | ratio |
|---|---|---:|---:|
| agentx | rwlock fast | 1,224 | {a}× |
| agentx | seqlock fast | 218 | {b}× |
| chat | rwlock fast | 444 | {c}× |
| chat | seqlock fast | 494 | 0.61× |
"""

PROSE = """# Prose

On agentx the RwLock gate's fast row runs at {a}× upstream's lane CPU, 1,224 ns per
event [results: targets.md @ {rev}].

Both fast rows: {b}× on agentx and chat [results: targets.md @ {rev}].

Their sum is 0.75× [derived: targets.md @ {rev}].
"""


def git(root, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    done = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                          env=env, check=True)
    return done.stdout.strip()


def commit(root, message):
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class RefreshTest(unittest.TestCase):
    """An old run at OLD (agentx rwlock 0.35×, seqlock 0.34×, chat rwlock
    0.34×: 0.34 sits in two cells), regenerated at NEW (0.41×, 0.30×, 0.38×:
    the two cells of 0.34 now differ)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = self.root = self.tmp.name
        git(root, "init", "-q")
        write(os.path.join(root, "code.txt"), "1\n")
        self.old = commit(root, "code at OLD")
        results = os.path.join(root, "papers", "results", "targets.md")
        write(results, TABLE.format(rev=self.old, a="0.35", b="0.34", c="0.34"))
        self.prose = os.path.join(root, "papers", "prose.md")
        write(self.prose, PROSE.format(a="0.35", b="0.34", rev=self.old[:7]))
        commit(root, "results regenerated at OLD")
        write(os.path.join(root, "code.txt"), "2\n")
        self.new = commit(root, "code at NEW")
        write(results, TABLE.format(rev=self.new, a="0.41", b="0.30", c="0.38"))
        commit(root, "results regenerated at NEW")
        self.saved = (cf.ROOT, cf.PAPERS, cf.RESULTS)
        cf.ROOT, cf.PAPERS = root, os.path.join(root, "papers")
        cf.RESULTS = os.path.join(cf.PAPERS, "results")

    def tearDown(self):
        cf.ROOT, cf.PAPERS, cf.RESULTS = self.saved
        self.tmp.cleanup()

    def run_refresh(self, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = refresh.main(["--old-rev", self.old[:7], *args, self.prose])
        with open(self.prose, encoding="utf-8") as f:
            return status, out.getvalue(), f.read()

    def test_dry_run_plans_and_leaves_the_file(self):
        status, out, text = self.run_refresh()
        self.assertEqual(status, 0)
        self.assertIn("0.35 -> 0.41", out)
        self.assertEqual(text, PROSE.format(a="0.35", b="0.34", rev=self.old[:7]))

    def test_table_figure_refreshed_with_its_suffix_and_tag_bumped(self):
        _, out, text = self.run_refresh("--write")
        self.assertIn("runs at 0.41× upstream's", text)
        self.assertIn("1,224 ns per", text)
        self.assertIn(f"1,224 ns per\nevent [results: targets.md @ {self.new[:7]}]", text)
        self.assertIn("2 figures refreshed (1 change value)", out)

    def test_ambiguous_figure_reported_not_changed(self):
        _, out, text = self.run_refresh("--write")
        self.assertIn("Both fast rows: 0.34× on agentx", text)
        self.assertRegex(out, r"prose\.md:6: 0\.34: at 2 locations with different new values")
        # The paragraph keeps its old tag, so check_figures keeps failing there.
        self.assertIn(f"and chat [results: targets.md @ {self.old[:7]}]", text)

    def test_derived_paragraph_reported_untouched(self):
        _, out, text = self.run_refresh("--write")
        self.assertIn(f"Their sum is 0.75× [derived: targets.md @ {self.old[:7]}]", text)
        self.assertRegex(out, r"prose\.md:8: derived \(targets\.md\): re-compute by hand")
        self.assertIn("1 unresolved, 1 derived paragraphs to redo", out)

    def test_range_whose_extremes_moved_is_left_whole(self):
        results = os.path.join(self.root, "papers", "results", "targets.md")
        write(results, TABLE.format(rev=self.new, a="0.70", b="0.30", c="0.38"))
        commit(self.root, "results regenerated again at NEW")
        with open(self.prose, "a", encoding="utf-8") as f:
            f.write(f"\nEvery row: 0.35–0.61× [results: targets.md @ {self.old[:7]}].\n")
        _, out, text = self.run_refresh("--write")
        # 0.35 -> 0.70 and 0.61 -> 0.61 would read 0.70–0.61: neither end is written.
        self.assertIn("Every row: 0.35–0.61×", text)
        self.assertIn("its extremes moved to other rows", out)

    def test_unknown_revision_is_an_error(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = refresh.main(["--old-rev", "0123456789abcdef", self.prose])
        self.assertEqual(status, 2)


class LocatorTest(unittest.TestCase):
    """The markdown locator on its own."""

    def test_row_key_grows_until_unique_and_fills_blank_cells(self):
        text = ("## Floor\n\n| workload | n | gate | bytes |\n|---|---:|---|---:|\n"
                "| agentx | 3 | rwlock | 57.6 |\n|  |  | seqlock | 57.7 |\n")
        index = refresh.markdown_locations(text)
        keys = {w[3]: v for w, v in index.items() if w[0] == "cell" and w[5][0] == "bytes"}
        self.assertEqual(keys, {("agentx", "rwlock"): ["57.6"], ("agentx", "seqlock"): ["57.7"]})

    def test_a_column_added_moves_no_other_column(self):
        old = "## T\n\n| row | a |\n|---|---:|\n| x | 1.5 |\n"
        new = "## T\n\n| row | b | a |\n|---|---:|---:|\n| x | 9.9 | 1.7 |\n"
        where = [w for w, v in refresh.markdown_locations(old).items() if v == ["1.5"]]
        self.assertEqual(refresh.markdown_locations(new)[where[0]], ["1.7"])

    def test_version_strings_are_not_numbers(self):
        self.assertEqual(refresh.NUMBER.findall("upstream-1.6.1 ran 0.35× (0.30–0.39, 15)"),
                         ["0.35", "0.30", "0.39", "15"])


if __name__ == "__main__":
    unittest.main()
