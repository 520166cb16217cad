#!/usr/bin/env python3
"""Refreshes the cited figures of papers/*.md prose after a regeneration.

After `papers/regenerate.sh` rewrites papers/results/* at a new revision, every
`[results: FILE @ OLD]` tag fails check_figures.py on purpose (the prose
predates the results). This script does the mechanical part of re-reading:

  python3 papers/refresh.py --old-rev OLD [--write] [files...]

For each paragraph (check_figures.py's paragraphs, tags and figures: a table
takes the tag above it) whose tag cites OLD, each figure is located in the
version of FILE that recorded OLD in its header (at OLD, or else the newest
commit of FILE's history that did), and the value at the same location of the
current FILE replaces it. A location is a markdown table cell (the section
heading above the table and the table's place under it, the row's key: its
first text cells, as many as make it unique, a blank cell repeating the one
above; the column's header; the n-th number in the cell), a line outside
tables (its heading and its text with the numbers blanked), or a leaf of
FILE's JSON sibling (its key path, rounded to the figure's decimals; tried
only when no markdown location writes the figure). The new value is written
as the new file writes it (thousands separators kept when the prose used
them); a `×` or `%` after the figure is left in place.

When a figure is written at several places of the old file, they are
narrowed, by rules that read only the prose's shape, never its words: the
two ends of a range (`13.8–16.5`) and `X ns against upstream's Y` share a
column; then the tables the paragraph's singly located figures sit in. The
figure is refreshed only when the places left agree on one new value; a
figure not found, or at places that now disagree (a tie in the old file that
the new one breaks), is left as it is and listed. A range whose ends sit in
one column is checked: a row of that column that lay within the old range
and lies outside the refreshed one is listed (the prose's range may no longer
hold, or never covered that row: a human decides). A tag is bumped to the
revision the current FILE records only when every figure it covers was
refreshed and no range check failed, so check_figures.py keeps failing on a
paragraph that still has a figure to re-read. `[derived: FILE @ REV]`
paragraphs are never edited: they are listed to re-compute by hand. Tags
citing another revision than OLD are listed and left alone.

Without --write the planned substitutions (old -> new, and where), tag bumps
and everything left to a human are printed; with --write the files are
edited too. Per prose file it prints how many figures were located and how
many at a single place; the last line counts figures refreshed, figures
unresolved, derived paragraphs to redo and ranges to re-check. Exit status 0,
or 2 on bad arguments or an OLD that is not a commit.

Checked by papers/test_refresh.py (a temporary git repository).
"""
import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_figures as cf  # noqa: E402

# Every number of a results file (integers too), not a version string.
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\d.]*\.\d)(?!\w)")
RANGE = re.compile(r"\s?[–-]\s?")
# "X ns against upstream's Y": Y is the same quantity for another row.
AGAINST = re.compile(r"[^\d();.]{0,30}\bagainst\b[^\d();.]{0,20}")

Located = collections.namedtuple("Located", "figure line column end new where")


def plain(number):
    return number.replace(",", "")


# --- the locations of a results file ----------------------------------------

def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_locations(heading, ordinal, block, index):
    """Adds each number of a markdown table (its lines; the `ordinal`-th
    table under `heading`) to `index`."""
    header, align, rows = cells(block[0]), cells(block[1]), [cells(b) for b in block[2:]]
    eligible = [i for i, a in enumerate(align) if i < len(header) and not a.endswith(":")
                and not any(i < len(r) and NUMBER.search(r[i]) for r in rows)]
    filled, last = [], {}
    for row in rows:
        for i in eligible:
            if i < len(row) and row[i]:
                last[i] = row[i]
        filled.append(tuple(last.get(i, "") for i in eligible))
    width = len(eligible)
    for width_try in range(1, len(eligible) + 1):
        if len(set(k[:width_try] for k in filled)) == len(filled):
            width = width_try
            break
    seen = collections.Counter()
    columns = [(h, header[:i].count(h)) for i, h in enumerate(header)]
    for row, key in zip(rows, filled):
        key = key[:width]
        seen[key] += 1
        for i, cell in enumerate(row[:len(header)]):
            if i in eligible:
                continue
            for k, m in enumerate(NUMBER.finditer(cell)):
                where = ("cell", heading, ordinal, key, seen[key], columns[i], k)
                index[where].append(m.group(1))


def markdown_locations(text):
    """{location: [number written there]} of a results markdown file. A
    table is known by its heading and its place under it (not its header
    row, so that a column added to it moves no other column)."""
    index = collections.defaultdict(list)
    heading, block, ordinal = "", [], 0
    lines = text.split("\n") + [""]
    for line in lines:
        if line.lstrip().startswith("|"):
            block.append(line)
            continue
        if len(block) >= 2:
            table_locations(heading, ordinal, block, index)
            ordinal += 1
        block = []
        if line.startswith("#"):
            heading, ordinal = line.strip("# ").strip(), 0
            continue
        template = NUMBER.sub("#", line)
        for k, m in enumerate(NUMBER.finditer(line)):
            index[("line", heading, template, k)].append(m.group(1))
    return index


def json_locations(text, index):
    """Adds each number leaf of a JSON text to `index`, at its key path."""
    def walk(value, path):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, path + (key,))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, path + (i,))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            index[("json", path)].append(value)
    try:
        walk(json.loads(text), ())
    except ValueError:
        pass


def locations(md_text, json_text):
    index = markdown_locations(md_text)
    if json_text is not None:
        json_locations(json_text, index)
    return index


def describe(where):
    """A location in words, for the report."""
    if where[0] == "cell":
        _, heading, _, key, _, (column, _), k = where
        return f"table '{heading[:40]}', row {' / '.join(key)}, column '{column}'" + \
            (f", number {k + 1}" if k else "")
    if where[0] == "line":
        return f"line '{where[2][:50]}', number {where[3] + 1}"
    return "JSON " + ".".join(str(p) for p in where[1])


# --- reading the old and the new versions -----------------------------------

def records(text, rev):
    match = cf.HEADER_REVISION.search(text or "")
    return match is not None and (match.group(1).startswith(rev) or rev.startswith(match.group(1)))


def show(commit, path):
    done = cf.git("show", f"{commit}:{path}")
    return done.stdout if done.returncode == 0 else None


def old_version(name, rev):
    """(markdown, JSON) of papers/results/NAME as it was when it recorded
    `rev`: at `rev` itself, or the newest commit of its history that did."""
    path = f"papers/results/{name}"
    json_path = os.path.splitext(path)[0] + ".json"
    commits = [rev] + cf.git("log", "--format=%H", "--", path).stdout.split()
    for commit in commits:
        text = show(commit, path)
        if records(text, rev):
            return text, show(commit, json_path)
    return None, None


def new_version(name):
    """(markdown, JSON, recorded revision) of the current papers/results/NAME."""
    path = os.path.join(cf.RESULTS, name)
    if not os.path.exists(path):
        return None, None, None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    json_path = os.path.splitext(path)[0] + ".json"
    json_text = None
    if os.path.exists(json_path):
        with open(json_path, encoding="utf-8") as f:
            json_text = f.read()
    match = cf.HEADER_REVISION.search(text)
    return text, json_text, match.group(1) if match else None


class Source:
    """One cited results file: its old and new locations."""

    def __init__(self, name, old_rev):
        self.name, self.old_rev = name, old_rev
        old_md, old_json = old_version(name, old_rev)
        new_md, new_json, self.revision = new_version(name)
        self.error = None
        if old_md is None:
            self.error = f"no version of {name} in its history records {old_rev}"
        elif new_md is None:
            self.error = f"{name} is not under papers/results/"
        else:
            self.old = locations(old_md, old_json)
            self.new = locations(new_md, new_json)


# --- locating one figure ------------------------------------------------------

def decimals(number):
    return len(number.split(".")[1]) if "." in number else 0


def matches(figure, value):
    """Whether a JSON number rounds to `figure`."""
    wanted = plain(figure)
    return f"{value:.{decimals(wanted)}f}" == wanted


def candidates(figure, sources):
    """(source, location) of each old location writing `figure`, over the
    cited files: in a markdown as written, else with the same value (`0.30`
    for `0.3`), else in a JSON file rounded to the figure's decimals."""
    tiers = ([], [], [])
    for source in sources:
        for where, values in source.old.items():
            if len(values) != 1:
                continue
            value = values[0]
            if not isinstance(value, str):
                if matches(figure, value):
                    tiers[2].append((source, where))
            elif plain(value) == plain(figure):
                tiers[0].append((source, where))
            elif float(plain(value)) == float(plain(figure)):
                tiers[1].append((source, where))
    return next((tier for tier in tiers if tier), [])


def new_value(figure, where, source):
    """The figure's new text at `where`, or None when the new file has no
    single number there."""
    values = source.new.get(where, [])
    if len(values) != 1:
        return None
    value = values[0]
    if isinstance(value, str):
        return with_separators(figure, value)
    return f"{value:.{decimals(plain(figure))}f}"


def table_of(located):
    """The table (or the file's lines, or a JSON object) of a location."""
    source, where = located
    if where[0] == "cell":
        return (source.name,) + where[:3]
    return (source.name, where[0], where[1] if where[0] == "line" else where[1][:-1])


def column_of(located):
    """The column of a table location and the number's place in its cells."""
    source, where = located
    if where[0] != "cell":
        return None
    return (source.name,) + where[:3] + where[5:]


def by_table(found, tables):
    """The locations in the tables the paragraph's other figures sit in alone."""
    kept = [c for c in found if table_of(c) in tables]
    return kept or found


def by_columns(found, partners):
    """The locations in the columns of the partner figures' locations, each
    partner in turn (the range's other end first) while several are left."""
    for partner in partners:
        if len(found) < 2:
            break
        columns = {column_of(c)[:-1] for c in partner if column_of(c)}
        found = [c for c in found if column_of(c) and column_of(c)[:-1] in columns] or found
    return found


def range_check(low, high, new_low, new_high, found_low, found_high):
    """When both ends of a range `low–high` sit in one column, the rows of
    that column whose old values lay within the range and whose new values
    fall outside the refreshed one (the prose's range may no longer hold, or
    may not have covered those rows: a human decides): a sentence, or None."""
    columns = {column_of(c) for c in found_low + found_high}
    if len(columns) != 1 or None in columns:
        return None
    column = columns.pop()
    source = found_low[0][0]
    lo, hi, new_lo, new_hi = (float(plain(v)) for v in (low, high, new_low, new_high))
    outside = []
    for where, values in source.old.items():
        if column_of((source, where)) != column or len(values) != 1:
            continue
        new = new_value(low, where, source)
        if lo <= float(plain(values[0])) <= hi and new is not None \
                and not new_lo <= float(plain(new)) <= new_hi:
            outside.append(f"{' / '.join(where[3])} {values[0]} -> {new}")
    if not outside:
        return None
    _, heading, _, _, _, (name, _), _ = found_low[0][1]
    return (f"range {low}–{high} refreshed to {new_low}–{new_high}, but in column '{name}' "
            f"of table '{heading[:40]}' " + "; ".join(outside[:4]) +
            " now lie outside it: re-read the range")


def with_separators(figure, value):
    """`value` with thousands separators when `figure` has them."""
    whole, _, fraction = value.partition(".")
    if "," in figure and whole.isdigit():
        return f"{int(whole):,}" + (f".{fraction}" if fraction else "")
    return value


def resolve(figure, found):
    """(new text, why not) of a figure at its narrowed locations."""
    if not found:
        return None, "not found in the old cited file"
    values = {new_value(figure, w, s) for s, w in found}
    if None in values:
        gone = [describe(w) for s, w in found if new_value(figure, w, s) is None]
        return None, f"no single number at {gone[0]} in the new file"
    if len(values) > 1:
        spots = "; ".join(f"{describe(w)} -> {new_value(figure, w, s)}" for s, w in found[:4])
        return None, f"at {len(found)} locations with different new values: {spots}"
    return values.pop(), None


def own_figures(lines, sections):
    """(match, index of its range's other end or None, indices of the
    figures it shares a column with) of each figure of a paragraph's own text
    (not its headings'): the ends of a range `X–Y`, and `X against Y`."""
    text = " ".join(lines)
    found = [m for m in cf.figure_matches(text) if m.group(1) not in sections]
    ends = [None] * len(found)
    partners = [[] for _ in found]
    for i in range(len(found) - 1):
        gap = text[found[i].end():found[i + 1].start()]
        if RANGE.fullmatch(gap):
            ends[i], ends[i + 1] = i + 1, i
            partners[i].insert(0, i + 1)
            partners[i + 1].insert(0, i)
        elif AGAINST.fullmatch(gap):
            partners[i + 1].append(i)
    return list(zip(found, ends, partners))


def raw_position(raw, start, lines, offset):
    """(line number, column in the raw line) of an offset in the paragraph's
    joined own text."""
    for j, line in enumerate(lines):
        if offset <= len(line):
            number = start + j
            return number, offset + len(raw[number - 1]) - len(line)
        offset -= len(line) + 1
    raise ValueError("offset beyond the paragraph")


class Report:
    """What one run found: substitutions, tag bumps, what is left to a human."""

    def __init__(self):
        self.refreshed, self.unresolved, self.derived, self.notes = [], [], [], []
        self.bumps, self.planned, self.planned_bumps = [], [], []
        self.range_checks = []
        self.per_file = collections.defaultdict(lambda: [0, 0, 0])


def narrowed(figures, sources):
    """The old locations of each figure, narrowed (twice, as each narrowing
    can single out locations the other uses) to the columns of the figures it
    shares a column with, then to the tables the paragraph's singly located
    figures sit in."""
    found = [candidates(m.group(1), sources) for m, _, _ in figures]
    for _ in range(2):
        found = [by_columns(c, [found[j] for j in partners])
                 for c, (_, _, partners) in zip(found, figures)]
        tables = {table_of(c[0]) for c in found if len(c) == 1}
        found = [by_table(c, tables) if len(c) > 1 else c for c in found]
    return found


def plan_paragraph(figures, sources):
    """(figure match, new text, where, located at one place, why not) of each
    figure of one paragraph, and the range checks that failed."""
    found = narrowed(figures, sources)
    plans = []
    for m, _, _ in figures:
        i = len(plans)
        new, why = resolve(m.group(1), found[i])
        where = "; ".join(f"{s.name}: {describe(w)}" for s, w in found[i][:2])
        plans.append((m, new, where, len(found[i]) == 1, why))
    checks = []
    for i, (m, end, _) in enumerate(figures):
        if end is not None and end > i and plans[i][1] and plans[end][1]:
            low, high = plans[i][1], plans[end][1]
            check = range_check(m.group(1), figures[end][0].group(1), low, high,
                                found[i], found[end])
            if float(plain(low)) > float(plain(high)):
                check = (f"range {m.group(1)}–{figures[end][0].group(1)} would read "
                         f"{low}–{high}: its extremes moved to other rows")
            if check:
                checks.append((m, check))
                # Neither end is written: a half-refreshed range reads as
                # checked when it is not.
                for k in (i, end):
                    plans[k] = plans[k][:4] + ("range left for a human (see the range list)",)
    return plans, checks


def refresh_paragraph(path, raw, start, lines, sources, sections, report):
    """Plans the refresh of every figure of one paragraph; True when all
    were located."""
    rel = os.path.relpath(path, cf.ROOT)
    complete = True
    tally = report.per_file[rel]
    plans, checks = plan_paragraph(own_figures(lines, sections), sources)
    for m, check in checks:
        complete = False
        report.range_checks.append(f"{rel}:{raw_position(raw, start, lines, m.start(1))[0]}: "
                                   + check)
    for m, new, where, single, why in plans:
        number, column = raw_position(raw, start, lines, m.start(1))
        figure = m.group(1)
        tally[0] += 1
        if why:
            complete = False
            report.unresolved.append(f"{rel}:{number}: {figure}: {why}")
            continue
        tally[1] += 1
        tally[2] += single
        report.refreshed.append(Located(figure, number, column, column + len(figure),
                                        new, where))
    return complete


def bump_tags(rel, raw, start, lines, tags, sources, report):
    """Plans the bump of the paragraph's tags citing the old revision (at
    `start`) to the revisions their files now record."""
    by_name = {s.name: s for s in sources}
    for tag in tags:
        source = by_name.get(tag.group(2))
        if tag.group(1) != "results" or source is None or source.revision is None \
                or not cites(tag.group(3), source.old_rev):
            continue
        rev = tag.group(3)
        new_rev = source.revision[:len(rev)]
        pattern = re.compile(r"\[results: " + re.escape(tag.group(2)) + " @ " + rev + r"\]")
        spots = [(number, m) for number in range(start, start + len(lines))
                 for m in pattern.finditer(raw[number - 1])]
        if not spots:
            report.unresolved.append(f"{rel}:{start}: tag {tag.group(0)} not on one line: "
                                     "bump it by hand")
        for number, m in spots:
            if new_rev != rev:
                report.bumps.append((number, m.start(), m.end(), m.group(0).replace(rev, new_rev)))


def cites(rev, old_rev):
    return rev.startswith(old_rev) or old_rev.startswith(rev)


def tag_kinds(tags):
    return {t.group(1) or ("hand-measured" if t.group(4) else "defined") for t in tags}


class FileRun:
    """The paragraphs of one prose file, grouped by the paragraph that holds
    their tags (a table inherits the tag above it)."""

    def __init__(self, path, old_rev, sources, report):
        self.path, self.old_rev, self.sources, self.report = path, old_rev, sources, report
        self.rel = os.path.relpath(path, cf.ROOT)
        with open(path, encoding="utf-8") as f:
            self.raw = f.read().split("\n")
        self.sections = cf.section_numbers(path)
        self.owner = None

    def source(self, name):
        if name not in self.sources:
            self.sources[name] = Source(name, self.old_rev)
        return self.sources[name]

    def close_owner(self):
        owner = self.owner
        if owner and owner["complete"] and owner["sources"]:
            bump_tags(self.rel, self.raw, owner["start"], owner["lines"], owner["tags"],
                      owner["sources"], self.report)
        self.owner = None

    def paragraph(self, start, lines, text, tags, inherited):
        if not inherited:
            self.close_owner()
            self.owner = {"start": start, "lines": lines, "tags": tags, "complete": True,
                          "sources": []}
        owner, has_figures = self.owner, bool(cf.figures(text))
        kinds = tag_kinds(tags)
        if not tags or not has_figures:
            return
        if kinds - {"results", "derived"}:
            if any(t.group(1) and cites(t.group(3), self.old_rev) for t in tags):
                owner["complete"] = False
                self.report.unresolved.append(f"{self.rel}:{start}: paragraph left: a tag "
                                              "citing the old revision beside a "
                                              "hand-measured or defined one")
            return
        names = ", ".join(sorted({t.group(2) for t in tags if t.group(2)}))
        if "derived" in kinds:
            owner["complete"] = False
            self.report.derived.append(f"{self.rel}:{start}: derived ({names}): "
                                       "re-compute by hand")
            return
        citing = [t for t in tags if cites(t.group(3), self.old_rev)]
        for t in tags:
            if t not in citing and not inherited:
                self.report.notes.append(f"{self.rel}:{start}: cites {t.group(2)} @ "
                                         f"{t.group(3)}, not {self.old_rev}: left alone")
        if not citing:
            return
        sources = [self.source(t.group(2)) for t in citing]
        owner["sources"] = sources
        errors = [s.error for s in sources if s.error]
        counted = [len([f for f in cf.figures(t) if f not in self.sections])
                   for t in (" ".join(lines), text)]
        if errors or counted[0] < counted[1]:
            why = errors[0] if errors else "a figure in the heading above"
            owner["complete"] = False
            self.report.unresolved.append(f"{self.rel}:{start}: paragraph left: {why}")
            if errors:
                return
        complete = refresh_paragraph(self.path, self.raw, start, lines, sources,
                                     self.sections, self.report)
        owner["complete"] = owner["complete"] and complete

    def run(self, write):
        refreshed, bumps = len(self.report.refreshed), len(self.report.bumps)
        for paragraph in cf.tagged_paragraphs(self.path):
            self.paragraph(*paragraph)
        self.close_owner()
        edits = [(r.line, r.column, r.end, r.new) for r in self.report.refreshed[refreshed:]]
        edits += self.report.bumps[bumps:]
        self.report.planned += [(f"{self.rel}:{r.line}", r)
                                for r in self.report.refreshed[refreshed:]]
        for number, _, _, new in self.report.bumps[bumps:]:
            self.report.planned_bumps.append(f"{self.rel}:{number}: tag -> {new}")
        if write and edits:
            for number, column, end, new in sorted(edits, reverse=True):
                line = self.raw[number - 1]
                self.raw[number - 1] = line[:column] + new + line[end:]
            with open(self.path, "w", encoding="utf-8") as f:
                f.write("\n".join(self.raw))


def print_report(report, verbose):
    changed = [(w, r) for w, r in report.planned if r.new != r.figure]
    for where, r in (report.planned if verbose else changed):
        print(f"  {where}: {r.figure} -> {r.new}  ({r.where})")
    for line in report.planned_bumps:
        print(f"  {line}")
    for title, items in (("unresolved (re-read by hand)", report.unresolved),
                         ("ranges to re-check (refreshed, tag not bumped)", report.range_checks),
                         ("derived paragraphs (re-compute by hand)", report.derived),
                         ("tags citing another revision", report.notes)):
        if items:
            print(f"{title}:")
            print("\n".join(f"  {item}" for item in items))
    print("located per file (figures of tags citing the old revision):")
    for name, (total, located, single) in report.per_file.items():
        print(f"  {name}: {located} of {total} located ({single} at a single location)")
    print(f"refresh: {len(report.refreshed)} figures refreshed ({len(changed)} change value), "
          f"{len(report.unresolved)} unresolved, {len(report.derived)} derived paragraphs "
          f"to redo, {len(report.range_checks)} ranges to re-check")


def prose_files(names):
    """Absolute paths of the prose files to refresh, or an error string."""
    if not names:
        return [os.path.join(cf.PAPERS, n) for n in cf.STRICT + cf.PARTIAL
                if os.path.exists(os.path.join(cf.PAPERS, n))], None
    paths = []
    for name in names:
        for candidate in (name, os.path.join(cf.PAPERS, name)):
            if os.path.isfile(candidate):
                paths.append(os.path.abspath(candidate))
                break
        else:
            return None, f"{name}: no such file"
    return paths, None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old-rev", required=True,
                        help="the revision the prose's [results: FILE @ REV] tags cite")
    parser.add_argument("--write", action="store_true", help="edit the files")
    parser.add_argument("--verbose", action="store_true",
                        help="list unchanged figures too")
    parser.add_argument("files", nargs="*", help="prose files (default: check_figures' "
                        "STRICT and PARTIAL files)")
    args = parser.parse_args(argv)
    if not cf.is_commit(args.old_rev):
        print(f"refresh: {args.old_rev} is not a commit of this repository", file=sys.stderr)
        return 2
    paths, error = prose_files(args.files)
    if error:
        print(f"refresh: {error}", file=sys.stderr)
        return 2
    report, sources = Report(), {}
    for path in paths:
        FileRun(path, args.old_rev, sources, report).run(args.write)
    print_report(report, args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
