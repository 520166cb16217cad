#!/usr/bin/env python3
"""Figures that cannot drift: checks the figures of papers/*.md prose (and
papers/regenerate.sh's comments) against the results files they cite.

The citation convention. A figure is a number written with a decimal point
(`1.98`), a thousands separator (`14,952`), or directly followed by `×` or
`%` (`2×`, `48%`); other integers (section numbers, core counts, issue
numbers) and version strings (`1.6.1`) are not figures, nor is a number
that numbers one of the file's sections (`3.7` in "section 3.7"). A paragraph (consecutive non-blank lines; a list
item is its own paragraph; fenced code is skipped) that states figures
carries one tag saying where they come from:

  [results: FILE @ REV]        FILE is a path under papers/results/ (for
                               example `mooncake.md`, `system-malloc/chat.md`);
                               REV is the commit the prose was written
                               against. Every figure of the paragraph must
                               appear, as written, in FILE or in the JSON file
                               of the same stem; REV must be a commit of this
                               repository and not older than the revision
                               FILE records in its header (FILE's revision is
                               REV or an ancestor of it).
  [derived: FILE @ REV]        the figures are computed from FILE (ratios,
                               sums): FILE and REV are checked as above, the
                               values are not (the output counts them).
  [hand-measured at REV]       an experiment that did not land, or a figure
                               from an earlier revision's run (not in the
                               results): REV must be a commit of this
                               repository; nothing else is checkable.
  [defined in PATH]            a constant the code sets (a bound, a default),
                               not a measurement: PATH must exist.

A heading's figures belong to the paragraph after it, and a table (or a
paragraph of a list) without a tag of its own takes the tags of the
paragraph just before it, so a tag above a table covers the table.

Several tags may share a paragraph when its figures come from several
files; a figure then must appear in one of the cited files.

Strictness. In a converted file (STRICT below) every paragraph with a
figure must carry a tag. In the other files only tagged paragraphs are
checked; the output lists those files and how many untagged figures they
hold, so nothing is silently taken as checked. A tag that fails (missing
file, unknown or too old commit, a figure absent from the cited file) fails
in any file. Exit 1 on a failure, 0 otherwise; run by .ci/run.

After a regeneration. papers/regenerate.sh rewrites the results at a new
revision, so every `[results: FILE @ OLD]` tag then fails here until its
prose is re-read. `python3 papers/refresh.py --old-rev OLD --write` does the
mechanical part: it finds each cited figure's cell (or line, or JSON key) in
the version of FILE that recorded OLD, writes the value now at that place,
bumps the tags whose figures were all found, and lists what a human must
re-read (figures not found or found at places that now disagree, ranges
whose column now has rows outside them, every [derived: ...] paragraph). Its
docstring has the rules; papers/test_refresh.py tests it.

Generated pages. papers/README.md (the one-page decision) is written by
papers/decision.py from the results and carries no tags: it is checked by
running `decision.py --check`, which fails when the page differs from what
the generator would write from the current results.

Usage: python3 papers/check_figures.py [--verbose]
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPERS = os.path.join(ROOT, "papers")
RESULTS = os.path.join(PAPERS, "results")
# Files in which every figure must be cited.
STRICT = ["profile-mooncake.md", "protocols.md", "porting.md", "regenerate.sh", "upstream-main.md",
          "evaluation.md"]
# Files checked only where they cite.
PARTIAL = []
# Pages a generator writes from the results (every figure rendered, none
# typed): checked by running the generator's --check, which fails when the
# page differs from what it would write.
GENERATED = {"README.md": "decision.py"}

FIGURE = re.compile(
    r"(?<![\w.])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d+(?=\s?[×%]))(?![\d.]*\.\d)")
TAG = re.compile(r"\[(results|derived): ([\w./-]+) @ ([0-9a-f]{7,40})\]"
                 r"|\[hand-measured at ([0-9a-f]{7,40})\]|\[defined in ([\w./-]+)\]")
HEADER_REVISION = re.compile(r"revision:?\s*`?([0-9a-f]{7,40})")


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)


def is_commit(rev):
    return git("cat-file", "-e", f"{rev}^{{commit}}").returncode == 0


def is_ancestor(older, newer):
    return git("merge-base", "--is-ancestor", older, newer).returncode == 0


def paragraph_lines(path):
    """(first line number, lines) of each paragraph outside fenced code; for a
    shell script, of each block of comment lines (without their `#`)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    script = path.endswith(".sh")
    out, current, start, fenced = [], [], 0, False
    for number, line in enumerate(lines, 1):
        if script:
            line = line[1:] if line.lstrip().startswith("#") else ""
        if line.strip().startswith("```"):
            fenced = not fenced
            line = ""
        starts_item = re.match(r"\s*([-*]|\d+\.)\s", line) is not None
        if fenced or not line.strip() or (starts_item and current):
            if current:
                out.append((start, current))
            current = [] if fenced or not line.strip() else [line]
            start = number
            continue
        if not current:
            start = number
        current.append(line)
    if current:
        out.append((start, current))
    return out


def paragraphs(path):
    """(first line number, text) of each paragraph of `paragraph_lines`."""
    return [(start, " ".join(lines)) for start, lines in paragraph_lines(path)]


def results_text(name):
    """Text of a results file and its JSON sibling, or None when absent."""
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return None
    texts = []
    for candidate in (path, os.path.splitext(path)[0] + ".json"):
        if os.path.exists(candidate):
            with open(candidate, encoding="utf-8") as f:
                texts.append(f.read())
    return "\n".join(texts)


def file_revision(name):
    with open(os.path.join(RESULTS, name), encoding="utf-8") as f:
        match = HEADER_REVISION.search(f.read())
    return match.group(1) if match else None


def figure_matches(text):
    """The FIGURE matches of `text` outside tags, inline code and links'
    targets (blanked to spaces, so the matches' offsets are `text`'s)."""
    def blank(match):
        return " " * len(match.group(0))
    text = TAG.sub(blank, re.sub(r"`[^`]*`|\]\([^)]*\)", blank, text))
    return list(FIGURE.finditer(text))


def figures(text):
    """The figures of `text` outside tags, inline code and links' targets."""
    return [m.group(1) for m in figure_matches(text)]


def spellings(figure):
    """The ways a results file may write `figure` (with and without thousands
    separators)."""
    plain = figure.replace(",", "")
    return {figure, plain}


def check_tag(kind, name, rev, failures, where):
    """Checks one results/derived tag; returns the cited file's text."""
    text = results_text(name)
    if text is None:
        failures.append(f"{where}: cites {name}, which is not under papers/results/")
        return None
    if not is_commit(rev):
        failures.append(f"{where}: cites {name} @ {rev}, not a commit of this repository")
        return text
    recorded = file_revision(name)
    if recorded and not is_ancestor(recorded, rev):
        failures.append(f"{where}: cites {name} @ {rev}, older than the revision the file "
                        f"records ({recorded[:12]}): the prose predates the results")
    return text


def check_paragraph(path, start, text, tags, strict, tally, failures, sections=()):
    """Checks the figures of one paragraph against its `tags`; `sections`
    are the file's section numbers, which cross-references name."""
    where = f"{os.path.relpath(path, ROOT)}:{start}"
    found = [f for f in figures(text) if f not in sections]
    if not tags:
        if found:
            tally["untagged"] += len(found)
            if strict:
                failures.append(f"{where}: figures {found[:6]} cite no results file "
                                "(add [results: FILE @ REV] or [hand-measured at REV])")
        return
    cited = []
    for tag in tags:
        if tag.group(5):
            if not os.path.exists(os.path.join(ROOT, tag.group(5))):
                failures.append(f"{where}: defined in {tag.group(5)}, which does not exist")
            tally["defined"] += len(found)
            return
        if tag.group(4):
            if not is_commit(tag.group(4)):
                failures.append(f"{where}: hand-measured at {tag.group(4)}, not a commit "
                                "of this repository")
            tally["hand-measured"] += len(found)
            return
        text_of = check_tag(tag.group(1), tag.group(2), tag.group(3), failures, where)
        if tag.group(1) == "derived":
            tally["derived"] += len(found)
            return
        if text_of is not None:
            cited.append(text_of)
    for figure in found:
        if cited and not any(s in t for s in spellings(figure) for t in cited):
            failures.append(f"{where}: {figure} does not appear in the cited results file")
        else:
            tally["checked"] += 1


def section_numbers(path):
    """The numbers of `path`'s sections ("3.7" of "### 3.7 ..."), which
    cross-references name and which are not figures."""
    with open(path, encoding="utf-8") as f:
        return set(re.findall(r"^#+\s*(\d+\.\d+)\s", f.read(), re.M))


def tagged_paragraphs(path):
    """(first line number, own lines, text, tags, inherited) of each paragraph
    of `path` but headings: `text` is the paragraph with the headings before
    it, `tags` its own, or for an untagged table or list item the tags of the
    paragraph just before (`inherited` then True)."""
    heading, previous_tags = "", []
    for start, lines in paragraph_lines(path):
        text = " ".join(lines)
        if text.lstrip().startswith("#"):
            # A heading's section number ("### 5.4") is not a figure.
            heading += " " + re.sub(r"^\s*#+\s*[\d.]+\s", " ", text)
            continue
        inherits = re.match(r"\s*(\||[-*]\s|\d+\.\s)", text) is not None
        text, heading = heading + " " + text, ""
        # A tag in inline code is an example, not a citation.
        tags = list(TAG.finditer(re.sub(r"`[^`]*`", " ", text)))
        inherited = not tags and inherits
        if inherited:
            tags = previous_tags
        yield start, lines, text, tags, inherited
        previous_tags = tags


def check_file(path, strict, tally, failures):
    """Checks every paragraph of `path` (`tagged_paragraphs`)."""
    sections = section_numbers(path)
    for start, _, text, tags, _ in tagged_paragraphs(path):
        check_paragraph(path, start, text, tags, strict, tally, failures, sections)


def main():
    verbose = "--verbose" in sys.argv[1:]
    failures, report = [], []
    for name in STRICT + PARTIAL:
        path = os.path.join(PAPERS, name)
        if not os.path.exists(path):
            continue
        tally = {"checked": 0, "derived": 0, "hand-measured": 0, "defined": 0, "untagged": 0}
        check_file(path, name in STRICT, tally, failures)
        mode = "strict" if name in STRICT else "UNCONVERTED (only tagged paragraphs checked)"
        report.append(f"  {name}: {mode}; {tally['checked']} figures checked against their "
                      f"results, {tally['derived']} derived, {tally['hand-measured']} "
                      f"hand-measured, {tally['defined']} defined in code, "
                      f"{tally['untagged']} untagged")
    for page, generator in GENERATED.items():
        done = subprocess.run([sys.executable, os.path.join(PAPERS, generator), "--check"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            failures.append(f"{page} differs from what {generator} writes from the results "
                            f"(run python3 papers/{generator}):\n{done.stdout}{done.stderr}")
        report.append(f"  {page}: generated by {generator}; "
                      f"{'matches' if done.returncode == 0 else 'DIFFERS FROM'} its output")
    print("check_figures:")
    print("\n".join(report))
    if verbose or failures:
        print("\n".join(f"  FAIL {f}" for f in failures))
    if failures:
        print(f"check_figures: {len(failures)} failures", file=sys.stderr)
        return 1
    print("check_figures: every tagged figure matches its results file; every cited commit "
          "is in the repository and not older than its results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
