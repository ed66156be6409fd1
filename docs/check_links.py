#!/usr/bin/env python3
"""Checks the documentation's links and its finding-kind pages.

Usage: python3 docs/check_links.py [MONGOTAP_BINARY]   (default: target/debug/mongotap)

1. Every relative Markdown link in README.md, ARCHITECTURE.md and docs/**/*.md,
   `[text](path)`, `[text](path#anchor)`, `[text](#anchor)`, images and reference
   definitions (`[label]: path`), must point at a file or directory that exists; an
   anchor into a Markdown file must be one of its headings' GitHub slugs. Links
   with a scheme (http:, https:, mailto:, ...) are skipped, and so is anything
   inside code (fenced blocks and inline code spans).
2. Every finding kind the binary lists must have its page, docs/findings/<kind>.md.
   The kinds are read from `mongotap detectors` when it lists them (a TOML
   `kinds = [...]` array, a `[kinds]`/`[findings]` table, or a `# kinds: a, b`
   comment); otherwise from the list of known kinds that `mongotap report` prints
   when `--fail-on` is given an unknown word (the contract's kinds, plus `any` and
   `new_shape`, which are not kinds). Finding no kind at all is a failure.
3. docs/findings/README.md, the index of kinds, links every page in docs/findings/.

Standard library only. Prints what it checked and every failure as file:line;
exits 1 on any failure, 0 otherwise.
"""

import os
import re
import subprocess
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(?:>\s*)*(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ID = re.compile(r"""<a\s[^>]*(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)


def markdown_files():
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "ARCHITECTURE.md")]
    for base, dirs, names in os.walk(os.path.join(ROOT, "docs")):
        dirs.sort()
        for n in sorted(names):
            if n.endswith(".md"):
                files.append(os.path.join(base, n))
    return [f for f in files if os.path.isfile(f)]


def strip_code_spans(line):
    """The line with inline code spans blanked out (same length, so columns hold)."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "`":
            n = len(line[i:]) - len(line[i:].lstrip("`"))
            ticks = line[i : i + n]
            end = line.find(ticks, i + n)
            if end != -1:
                out.append(" " * (end + n - i))
                i = end + n
                continue
            out.append(ticks)
            i += n
            continue
        out.append(line[i])
        i += 1
    return "".join(out)


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(re.sub(r"^(\s*>\s?)+", "", line))
            if m:
                marker = m.group(1)
                if fence is None:
                    fence = marker
                    continue
                if marker[0] == fence[0] and len(marker) >= len(fence):
                    fence = None
                    continue
            if fence is None:
                yield number, line


def slug(text):
    """GitHub's heading anchor: markup dropped, lower case, punctuation removed,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in ("L", "N") or cat == "Mn":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, seen = set(), {}
        for _, line in prose_lines(path):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            for a in HTML_ID.findall(line):
                found.add(a)
        _anchors[path] = found
    return _anchors[path]


def check_links(failures):
    checked_files = checked_links = 0
    for path in markdown_files():
        checked_files += 1
        rel_path = os.path.relpath(path, ROOT)
        for number, line in prose_lines(path):
            text = strip_code_spans(line)
            targets = [m.group(1) for m in INLINE_LINK.finditer(text)]
            m = REF_DEF.match(text)
            if m:
                targets.append(m.group(1))
            for target in targets:
                target = target.strip()
                if target.startswith("<") and target.endswith(">"):
                    target = target[1:-1]
                if not target or SCHEME.match(target) or target.startswith("//"):
                    continue
                checked_links += 1
                where = f"{rel_path}:{number}"
                file_part, _, anchor = target.partition("#")
                file_part = file_part.split("?", 1)[0]
                if file_part:
                    dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                    if not os.path.exists(dest):
                        failures.append(f"{where}: broken link {target}: {os.path.relpath(dest, ROOT)} does not exist")
                        continue
                else:
                    dest = path
                if anchor and dest.endswith(".md") and os.path.isfile(dest):
                    if anchor.lower() not in anchors(dest):
                        failures.append(
                            f"{where}: broken anchor {target}: no heading of {os.path.relpath(dest, ROOT)} has the slug #{anchor}"
                        )
    print(f"links: {checked_links} relative links checked in {checked_files} Markdown files")


def kinds_from_detectors(output):
    """Finding kinds, if `mongotap detectors` lists them; None if it does not."""
    kinds = []
    m = re.search(r"^\s*(?:finding_)?kinds\s*=\s*\[(.*?)\]", output, re.S | re.M)
    if m:
        kinds += re.findall(r"[\"']([a-z][a-z0-9_]*)[\"']", m.group(1))
    table = None
    for line in output.splitlines():
        s = line.strip()
        if s.startswith("["):
            table = s.strip("[]").strip()
            continue
        c = re.match(r"#\s*(?:finding\s+)?kinds\s*:\s*(.+)$", s, re.I)
        if c:
            kinds += re.findall(r"[a-z][a-z0-9_]*", c.group(1))
        elif table in ("kinds", "findings", "finding_kinds") and "=" in s and not s.startswith("#"):
            kinds.append(s.split("=", 1)[0].strip().strip("\"'"))
    return sorted(set(kinds)) or None


def kinds_from_gate(binary):
    """The contract's kinds, from the CI gate's message for an unknown --fail-on word."""
    probe = "?not-a-kind"
    missing = os.path.join(ROOT, "docs", ".no-such-report.json")
    r = subprocess.run(
        [binary, "report", missing, "--baseline", missing, "--fail-on", probe],
        capture_output=True, text=True, timeout=60,
    )
    m = re.search(r"\(known:\s*([^)]*)\)", r.stdout + r.stderr)
    if not m:
        return None
    words = [w.strip() for w in m.group(1).split(",")]
    return sorted(w for w in words if w and w not in ("any", "new_shape"))


def check_kinds(binary, failures):
    if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
        failures.append(f"{binary}: no mongotap binary there (build it, or pass its path as the first argument)")
        return
    r = subprocess.run([binary, "detectors"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        failures.append(f"{binary} detectors: exit {r.returncode}: {r.stderr.strip()[:300]}")
        return
    kinds = kinds_from_detectors(r.stdout)
    source = f"`{os.path.relpath(binary, ROOT)} detectors`"
    if kinds is None:
        kinds = kinds_from_gate(binary)
        source = (
            f"`{os.path.relpath(binary, ROOT)} detectors` lists thresholds only "
            f"({sum(1 for l in r.stdout.splitlines() if '=' in l and not l.startswith('#'))} of them); "
            "kinds from the CI gate's list of known --fail-on words"
        )
    if not kinds:
        failures.append(f"{binary}: could not read the list of finding kinds from it")
        return
    print(f"kinds: {len(kinds)} finding kinds ({source}): {', '.join(kinds)}")
    for kind in kinds:
        page = os.path.join(ROOT, "docs", "findings", f"{kind}.md")
        if not os.path.isfile(page):
            failures.append(f"docs/findings/{kind}.md:1: missing page for finding kind {kind}")


def check_index(failures):
    folder = os.path.join(ROOT, "docs", "findings")
    index = os.path.join(folder, "README.md")
    if not os.path.isfile(index):
        failures.append("docs/findings/README.md:1: the index of finding kinds is missing")
        return
    linked = set()
    for _, line in prose_lines(index):
        for m in INLINE_LINK.finditer(strip_code_spans(line)):
            linked.add(os.path.normpath(os.path.join(folder, m.group(1).split("#")[0])))
    pages = sorted(n for n in os.listdir(folder) if n.endswith(".md") and n != "README.md")
    for n in pages:
        if os.path.join(folder, n) not in linked:
            failures.append(f"docs/findings/README.md:1: docs/findings/{n} is not linked from the index")
    print(f"index: docs/findings/README.md links {len(pages)} kind pages")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "debug", "mongotap")
    if not os.path.isabs(binary) and not os.path.exists(binary):
        binary = os.path.join(ROOT, binary)  # relative to the repository, wherever it runs from
    binary = os.path.abspath(binary)
    failures = []
    check_links(failures)
    check_kinds(binary, failures)
    check_index(failures)
    for f in failures:
        print(f"FAIL {f}")
    if failures:
        print(f"check_links: {len(failures)} failure(s)")
        return 1
    print("check_links: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
