#!/usr/bin/env python3
"""How much resume code the operations carry (issue 29's measure), at a git revision.

Counts, in `src/ops`, `src/source` and the facade (`src/dataset.rs` or `src/dataset/`), every
line of an `impl Resumable for` block, plus every other line (not a comment, not in a test
module) that names a resume concept (save, restore, replay, State, Prov, positions, holds,
marks, checkpoints). It reads the tree as text, so it compares revisions across a redesign.

    python3 scripts/count_resume.py REV [--files] [--items]   # e.g. eb848c5 (before issue 29), HEAD

REV `WORKTREE` counts the files as they are on disk. With `--files-of OLD`, only the files
that existed at OLD are counted (issue 29's comparison: `WORKTREE --files-of eb848c5`).

With `--items`, a whole item (a `struct`, `enum`, `fn`, `type` or `impl` block) whose header
names a resume concept counts with every line of its body (`struct WindowReplay`, `fn
restore`, `impl Resumable for`), beside the concept lines outside such items: a second
measure, for resume code whose lines do not each name a concept.
"""

import os
import re
import subprocess
import sys

ROOTS = ["src/ops", "src/source", "src/dataset.rs", "src/dataset"]
CONCEPT = re.compile(
    r"Resumable|\bsave|restor|Restor|replay|Replay|\bState\b|State::|\bProv\b|provs?\b"
    r"|\bwords?\(|\.words|\bagain|Hold\b|\.hold|\bheld|Held|positions|resum|Resum|Skipping"
    r"|Marker|pending|Refill|refill|checkpoint|last_prov|ctx\.resume|Routed|for_input"
)


INPUT_READ = re.compile(r"\.hold\.(?=(poll_next|size_hint|is_terminated|poll_fill)\()")


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


ITEM = re.compile(r"\s*(pub(\([a-z]+\))? )?(struct|enum|fn|type|impl)\b")


def count(lines, items=False):
    n, i = 0, 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"#\[cfg\(test\)\]", line):
            break
        whole = items and ITEM.match(line) and CONCEPT.search(line) and line.rstrip().endswith("{")
        if whole or re.match(r"\s*impl.*\bResumable for\b", line):
            indent = len(line) - len(line.lstrip())
            j = i
            while j < len(lines) and not (
                lines[j].startswith(" " * indent + "}") and len(lines[j].rstrip()) == indent + 1
            ):
                j += 1
            n += j - i + 1
            i = j + 1
            continue
        # A stage reading its input through its hold (`this.hold.poll_next(cx)`) is not resume
        # code: before issue 29 the same line read `this.input.poll_next(cx)`.
        text = INPUT_READ.sub(".input.", line.strip())
        if text and not text.startswith("//") and CONCEPT.search(text):
            n += 1
        i += 1
    return n


def main():
    rev = sys.argv[1]
    if rev == "WORKTREE":
        listed = git("ls-files", "--cached", "--others", "--exclude-standard", *ROOTS).split()
        files = [f for f in listed if f.endswith(".rs") and os.path.exists(f)]
        text = lambda f: open(f).read()
    else:
        files = [f for f in git("ls-tree", "-r", "--name-only", rev, *ROOTS).split() if f.endswith(".rs")]
        text = lambda f: git("show", f"{rev}:{f}")
    if "--files-of" in sys.argv:
        # Only the files that existed at that revision (and `src/dataset/`, which split from
        # `src/dataset.rs`): operations added since are left out of the comparison.
        then = sys.argv[sys.argv.index("--files-of") + 1]
        old = set(git("ls-tree", "-r", "--name-only", then, *ROOTS).split())
        files = [f for f in files if f in old or f.startswith("src/dataset/")]
    items = "--items" in sys.argv
    per = {f: count(text(f).split("\n"), items) for f in files}
    print(f"{rev}: {sum(per.values())} lines of resume code in {len(files)} files")
    if "--files" in sys.argv:
        for f, n in sorted(per.items(), key=lambda x: -x[1]):
            print(f"{n:6} {f}")


if __name__ == "__main__":
    main()
