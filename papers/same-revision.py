#!/usr/bin/env python3
"""One revision for every result: fails when a results file under DIR records
no revision, a revision other than EXPECTED, or a run with uncommitted changes.

papers/regenerate.sh runs it on its scratch directory after every step and
before anything is copied over papers/results, so the committed results never
mix revisions (a step that ran before a commit, or a file left from an older
run, names its revision and is refused here).

What each generator writes, and what is read here:
  crtc compare     `- git revision: SHA` (md), `"git_revision": "SHA"` and
                   `"git_dirty"` (json), `git revision SHA` (svg)
  papers/*.py      `- revision: SHA` (md), `"revision": "SHA"` (json),
                   `revision: SHA` in the keep-up chart's comment
  code-size.py     "at revision `SHA`" (12 hex digits)
  .ci/deep.sh      `- revision: `SHA``
A dirty run adds "uncommitted changes" to the revision (or `"git_dirty": true`).

Usage: python3 papers/same-revision.py DIR EXPECTED
"""
import os
import re
import sys

REVISION = re.compile(r"(?:git[ _]revision|revision)[\"`:\s]*([0-9a-f]{7,40})")
DIRTY = re.compile(r"uncommitted changes|\"git_dirty\":\s*true")
KINDS = (".md", ".json", ".svg")


def problems(path, expected):
    """What is wrong with one file's recorded revision (an empty list when
    it names `expected` and a clean tree)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = set(REVISION.findall(text))
    if not found:
        return ["records no revision"]
    out = [f"records revision {rev}, not {expected[:12]}"
           for rev in sorted(found) if not expected.startswith(rev)]
    if DIRTY.search(text):
        out.append("ran with uncommitted changes")
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    directory, expected = argv
    failures, count = [], 0
    for base, _, names in os.walk(directory):
        for name in sorted(names):
            if not name.endswith(KINDS):
                continue
            path = os.path.join(base, name)
            count += 1
            failures += [f"{os.path.relpath(path, directory)}: {p}"
                         for p in problems(path, expected)]
    if count == 0:
        failures.append("no results files at all")
    for failure in failures:
        print(f"same-revision: {failure}", file=sys.stderr)
    if failures:
        print(f"same-revision: refusing to mix revisions ({len(failures)} problems in "
              f"{directory}; every file must come from {expected} with a clean tree)",
              file=sys.stderr)
        return 1
    print(f"same-revision: all {count} results files in {directory} record {expected[:12]}, "
          "clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
