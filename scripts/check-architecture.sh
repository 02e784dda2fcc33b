#!/usr/bin/env bash
# Keeps ARCHITECTURE.md true: every file path and every test it names must exist, so a moved
# file or a renamed test fails CI instead of leaving the document pointing at nothing.
# Usage: scripts/check-architecture.sh [file]   (default: ARCHITECTURE.md at the repo root)
# Takes a second (no build). Prints each missing item with its line; exits 1 if any is missing.
#
# The rules, kept simple so a reader can predict them:
# - A path is a backticked token of path characters only ([A-Za-z0-9_.*/-]) that contains a
#   `/` or ends in .rs .sql .sh .py .toml .md, or a bare word in the prose ending in one of
#   those extensions (so an unquoted `DESIGN.md` counts too). One that starts with a top-level
#   directory (`crates/`, `src/`, `tests/`, ...) must resolve from the repo root, as a reader
#   would read it (globs allowed); any other (`engine.rs`, `tools/mod.rs`: the document names
#   files within their crate) must be the end of some path under the source dirs.
# - A test name is a backticked snake_case identifier of four or more words
#   (`compaction_and_assembly_keep_the_invariants`); the document names tests that way. It
#   exists if the source dirs hold `fn <name>` (Rust) or `def <name>` (Python). The few other
#   names that long (a setting, a tool) pass as a `pub <name>:` field or a TOML key.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
doc="${1:-$root/ARCHITECTURE.md}"

python3 - "$root" "$doc" <<'EOF'
import glob, os, re, sys

root, doc = sys.argv[1], sys.argv[2]
dirs = ["crates", "src", "python", "node", "schema", "scripts", "tests", "benches", "examples"]
skip = {"target", "node_modules", "__pycache__"}

# Every file and directory under the source dirs, as paths from the root.
paths, defined = set(), set()
for d in dirs:
    for here, subdirs, files in os.walk(os.path.join(root, d)):
        subdirs[:] = [s for s in subdirs if s not in skip and not s.startswith(".")]
        rel = os.path.relpath(here, root)
        paths.add(rel)
        for f in files:
            paths.add(os.path.join(rel, f))
            if f.endswith((".rs", ".py", ".toml")):
                text = open(os.path.join(here, f), encoding="utf-8", errors="replace").read()
                defined.update(re.findall(r"\b(?:fn|def)\s+(\w+)", text))
                defined.update(re.findall(r"^\s*pub\s+(\w+)\s*:", text, re.M))
                if f.endswith(".toml"):
                    defined.update(re.findall(r"^\s*#?\s*(\w+)\s*=", text, re.M))
text = open(os.path.join(root, "strata.example.toml"), encoding="utf-8").read()
defined.update(re.findall(r"^\s*#?\s*(\w+)\s*=", text, re.M))
top = {e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e))}

ext = r"\.(?:rs|sql|sh|py|toml|md)"
def path_exists(p):
    if glob.glob(os.path.join(root, p)):
        return True
    if p.split("/")[0] in top:
        return False
    p = p.rstrip("/")
    return any(q.endswith("/" + p) for q in paths)

missing = 0
in_fence = False
for n, line in enumerate(open(doc, encoding="utf-8"), 1):
    if line.startswith("```"):
        in_fence = not in_fence
        continue
    if in_fence:  # the diagram: box labels, not claims about files
        continue
    ticked = re.findall(r"`([^`]+)`", line)
    prose = re.sub(r"`[^`]*`", " ", line)
    for t in ticked + re.findall(r"[\w./-]*\w" + ext + r"\b", prose):
        if re.fullmatch(r"[A-Za-z0-9_.*/-]+", t) and ("/" in t or re.search(ext + "$", t)) \
                and t.strip("/") and not path_exists(t):
            print(f"{doc}:{n}: no such path: {t}")
            missing += 1
    for t in ticked:
        if re.fullmatch(r"[a-z][a-z0-9]*(?:_[a-z0-9]+){3,}", t) and t not in defined:
            print(f"{doc}:{n}: no fn or def named: {t}")
            missing += 1

if missing:
    print(f"{missing} name(s) in {os.path.basename(doc)} point at nothing")
    sys.exit(1)
print(f"{os.path.basename(doc)}: every path and test it names exists")
EOF
