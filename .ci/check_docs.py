#!/usr/bin/env python3
"""Documentation hygiene checks, run by ``.ci/run`` and by ``tests/test_docs_hygiene.py``.

Two checks on the repository's tracked files (``git ls-files``):

1. **Every cited document exists in the repository.** Markdown links
   ``[text](path)``, and ``*.md`` paths or repository paths (``docs/...``,
   ``tfp_sgmcmc/...``, ``tests/...``, ...) written anywhere (code, docstrings,
   comments, pages), must name a file that exists. A link to
   ``docs/algorithms.md#anchor`` must name an anchor defined on that page.
   Names of the project's private working notes are refused outright.
2. **No wording about how the project was made** ("seed paper", "main job",
   numbered work periods, "issue N", ...) in any tracked text.

And one check on a built site (``--site DIR``, after ``mkdocs build``):

3. **The HTML renders.** No literal Sphinx role (``:class:`X```) survives,
   no ``$...$`` / ``\\(...\\)`` math delimiter is left outside the spans that
   ``pymdownx.arithmatex`` hands to KaTeX (code blocks excepted), every
   formula compiles with the vendored KaTeX (when ``node`` is installed), no
   code fence is left as literal text (a fenced block that Markdown did not
   recognise, e.g. inside a list item without ``pymdownx.superfences`` or
   indented less than the item's content), no paragraph holds a line that
   starts with a list marker (``2.``, ``-``, ``*``, ``+``: a list that broke
   into running text) or a reference entry (``[1]:``), and code blocks are
   syntax-highlighted.

Exit status 1 with one line per finding (``file:line: message``), else 0.
"""

from __future__ import annotations

import argparse
import html
import html.parser
import json
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Files this check does not scan: itself and its test (they spell the patterns),
#: and vendored third-party assets.
EXEMPT = (".ci/check_docs.py", "tests/test_docs_hygiene.py")
EXEMPT_PREFIXES = ("docs/assets/",)
TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".txt", ".cfg", ".ini", ".json", ""}

#: Private working notes that never ship; citing them is always an error.
PRIVATE_NOTES = re.compile(
    r"ALGORITHMS(?:\.md)?\s*§|ALGORITHMS\.md|DESIGN\.md|deps-notes|style-anchors|"
    r"anchors-features|\.\./shared\b|\bshared/(?:papers|research|peers)\b|\bpapers/[0-9]{3}_"
)

#: Wording about how the project was made. Checked case-insensitively.
MAKING_OF = re.compile(
    r"seed[ -]papers?\b|\bseeds? (?:paper )?0{2}[0-9]\b|main[ -]job|"
    r"\bissue ?#?[0-9]+\b|\bsession [0-9]+\b|\b(?:previous|earlier|last|next) session\b|"
    r"\bend of the session\b|\bhelper agents?\b|"
    r"\bthe issue's\b|\bthe issue (?:asks|says|requires)\b",
    re.IGNORECASE,
)

MD_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)|!\[[^\]\n]*\]\(([^)\s]+)\)")
#: A repository path: starts at a top-level folder, ends in a file suffix.
TOP_DIRS = ("docs", "tfp_sgmcmc", "tests", "examples", "benchmarks", "models", ".ci")
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:" + "|".join(re.escape(d) for d in TOP_DIRS) + r")"
    r"/[\w./-]*\.(?:md|py|txt|toml|yml|json|png|csv|npz))(#[\w-]+)?"
)
#: A bare ``name.md`` citation (resolved next to the citing file, then under docs/).
BARE_MD = re.compile(r"(?<![\w./*{}-])([\w-]+(?:/[\w-]+)*\.md)(#[\w-]+)?(?![\w*])")
ANCHOR_DEF = re.compile(r"\{#([\w-]+)\}")


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split("\n")
    _TRACKED[:] = [f for f in out if f]
    keep = []
    for f in out:
        if not f or f in EXEMPT or f.startswith(EXEMPT_PREFIXES):
            continue
        if pathlib.Path(f).suffix not in TEXT_SUFFIXES or not (ROOT / f).is_file():
            continue
        keep.append(f)
    return keep


def _anchors(page: pathlib.Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    ids = set(ANCHOR_DEF.findall(text))
    for line in text.splitlines():  # headings without an explicit id: mkdocs' slug
        m = re.match(r"#{1,6}\s+(.*?)\s*$", line)
        if m and "{#" not in line:
            slug = re.sub(r"[^\w\s-]", "", m.group(1).lower()).strip()
            ids.add(re.sub(r"[\s]+", "-", slug))
    return ids


_TRACKED: list[str] = []
#: Git-ignored folders that examples and runs write into (see .gitignore).
GENERATED_DIRS = ("out/", "runs/")


def _resolve(name: str, citing: str) -> pathlib.Path | None:
    """The existing file a citation names, trying the citing file's folder,
    the repository root and ``docs/``; then, for text that a script writes
    into a page elsewhere (``../figures/x.png`` from an example), any tracked
    file whose path ends with the name. ``None`` if none exists."""
    base = (ROOT / citing).parent
    for cand in (base / name, ROOT / name, ROOT / "docs" / name):
        try:
            if cand.resolve().is_file() and ROOT in cand.resolve().parents:
                return cand.resolve()
        except OSError:
            pass
    tail = re.sub(r"^(?:\.\.?/)+", "", name)
    if not tail.startswith(TOP_DIRS):
        for f in _TRACKED:
            if f == tail or f.endswith("/" + tail):
                return ROOT / f
    return None


def check_anchor(target: pathlib.Path, anchor: str | None) -> str | None:
    if not anchor or target.suffix != ".md":
        return None
    if anchor.lstrip("#") not in _anchors(target):
        rel = target.relative_to(ROOT)
        return f"{rel} has no section anchor {anchor}"
    return None


def check_citations(files: list[str]) -> list[str]:
    problems = []
    for f in files:
        text = (ROOT / f).read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            where = f"{f}:{lineno}"
            m = PRIVATE_NOTES.search(line)
            if m:
                problems.append(f"{where}: cites a document outside the repository: {m.group(0)!r}")
            if f.endswith(".json"):  # stored results record what was run then
                continue
            seen = set()
            for m in MD_LINK.finditer(line):
                url = m.group(1) or m.group(2)
                if not re.fullmatch(r"[\w./#-]+", url) or not re.search(r"[./]", url):
                    continue  # code such as ``x[i](args)``, not a link
                if re.match(r"[a-z][a-z0-9+.-]*:", url) or url.startswith("#"):
                    continue
                path, _, anchor = url.partition("#")
                if "*" in path or "{" in path or "<" in path:
                    continue
                seen.add(path)
                target = _resolve(path, f)
                if target is None:
                    problems.append(f"{where}: link to a missing file: {url}")
                elif err := check_anchor(target, "#" + anchor if anchor else None):
                    problems.append(f"{where}: {err}")
            for rx in (REPO_PATH, BARE_MD):
                for m in rx.finditer(line):
                    path, anchor = m.group(1), m.group(2)
                    if path in seen or "*" in path or path.startswith("_"):
                        continue
                    if path.startswith(GENERATED_DIRS):
                        continue  # a file a run writes into a git-ignored folder, not a citation
                    if re.search(r"--out(?:put)?[ =]$", line[: m.start()]):
                        continue  # a file the command writes, not a citation
                    seen.add(path)
                    target = _resolve(path, f)
                    if target is None:
                        problems.append(f"{where}: cites a missing file: {path}")
                    elif err := check_anchor(target, anchor):
                        problems.append(f"{where}: {err}")
    return problems


def check_wording(files: list[str]) -> list[str]:
    problems = []
    for f in files:
        text = (ROOT / f).read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            m = MAKING_OF.search(line)
            if m:
                problems.append(
                    f"{f}:{lineno}: wording about how the project was made: {m.group(0)!r}"
                )
    return problems


SPHINX_ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj|ref):(?:`|<code>)")
INLINE_DOLLAR = re.compile(r"(?<![\\\w$])\$(?=\S)[^$\n]*?[\\^_{}][^$\n]*?(?<=\S)\$(?![\w$])")
RAW_DELIMS = re.compile(r"\\\(|\\\[|\$\$")


#: A code fence that Markdown left as text (outside ``<code>``/``<pre>``).
LITERAL_FENCE = re.compile(r"`{3,}|~{3,}")
#: A fenced block that Markdown read as an inline code span (its backticks paired up):
#: ``<code>`` starting with the fence's language word and a line break.
INLINE_FENCE = re.compile(
    r"<code>(?:python|py|pycon|bash|sh|shell|console|text|none|yaml|toml|json|ini)\n"
)
#: A line of a paragraph that starts like a list item or a reference entry: the list (or
#: the reference list) was not recognised and ran into the paragraph.
LIST_LINE = re.compile(r"^[ \t]*(?:[0-9]+[.)]|[-*+]|\[[0-9]+\]:)[ \t]+\S", re.M)
_VOID = {"br", "img", "hr", "input", "meta", "link", "wbr", "source", "col"}


class _TextScanner(html.parser.HTMLParser):
    """Collects text outside code, scripts and arithmatex spans, the text of each
    paragraph (code included, math excluded), and the ``<pre>`` blocks' classes."""

    SKIP_TAGS = {"code", "pre", "script", "style", "textarea"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []  # True where the element hides its text
        self.math: list[bool] = []  # True inside an arithmatex span
        self.highlight: list[bool] = []  # True inside a Pygments-highlighted block
        self.text: list[tuple[int, str]] = []
        self.paragraphs: list[tuple[int, str]] = []  # (first line, text) of each <p>
        self._para: list[str] | None = None
        self._para_line = 0
        self._para_depth = 0
        self.code_blocks: list[tuple[int, bool]] = []  # (line, highlighted) of each <pre>

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            return
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        hidden = tag in self.SKIP_TAGS or "arithmatex" in classes
        self.stack.append(hidden or (bool(self.stack) and self.stack[-1]))
        self.math.append("arithmatex" in classes or (bool(self.math) and self.math[-1]))
        if tag == "p" and self._para is None:
            self._para, self._para_line, self._para_depth = [], self.getpos()[0], len(self.stack)
        self.highlight.append(
            "highlight" in classes or (bool(self.highlight) and self.highlight[-1])
        )
        if tag == "pre":
            # Pygments (pymdownx.highlight) puts each block in <div class="highlight">;
            # a bare <pre><code> was not highlighted.
            self.code_blocks.append((self.getpos()[0], self.highlight[-1]))

    def handle_endtag(self, tag):
        if self.stack and tag not in _VOID:
            if tag == "p" and self._para is not None and len(self.stack) == self._para_depth:
                self.paragraphs.append((self._para_line, "".join(self._para)))
                self._para = None
            self.stack.pop()
            self.math.pop()
            self.highlight.pop()

    def handle_data(self, data):
        if not (self.stack and self.stack[-1]):
            self.text.append((self.getpos()[0], data))
        if self._para is not None and not (self.math and self.math[-1]):
            self._para.append(data)


def check_site(site: pathlib.Path) -> list[str]:
    problems = []
    pages = sorted(p for p in site.rglob("*.html") if "assets" not in p.parts)
    if not pages:
        return [f"{site}: no HTML page found (build the site first)"]
    for page in pages:
        raw = page.read_text(encoding="utf-8")
        rel = page.relative_to(site)
        for m in SPHINX_ROLE.finditer(raw):
            lineno = raw.count("\n", 0, m.start()) + 1
            problems.append(f"{rel}:{lineno}: literal Sphinx role {m.group(0)!r}")
        for m in INLINE_FENCE.finditer(raw):
            lineno = raw.count("\n", 0, m.start()) + 1
            problems.append(
                f"{rel}:{lineno}: literal code fence read as inline code (a code block that "
                f"did not render): {m.group(0)[:20]!r}"
            )
        scanner = _TextScanner()
        scanner.feed(raw)
        for lineno, data in scanner.text:
            for rx in (INLINE_DOLLAR, RAW_DELIMS):
                m = rx.search(data)
                if m:
                    problems.append(
                        f"{rel}:{lineno}: unrendered math delimiter in {m.group(0)[:40]!r}"
                    )
            if LITERAL_FENCE.search(data):
                problems.append(
                    f"{rel}:{lineno}: literal code fence in the text (a code block that did "
                    f"not render): {data.strip()[:60]!r}"
                )
        for lineno, text in scanner.paragraphs:
            for m in LIST_LINE.finditer(text):
                line = lineno + text.count("\n", 0, m.start())
                end = text.find("\n", m.start())
                problems.append(
                    f"{rel}:{line}: a list ran into a paragraph (line starts with a list "
                    f"marker): {text[m.start() : None if end < 0 else end].strip()[:60]!r}"
                )
        for lineno, highlighted in scanner.code_blocks:
            if not highlighted:
                problems.append(f"{rel}:{lineno}: code block without syntax highlighting")
    return problems


ARITHMATEX = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)
_KATEX_JS = r"""
const katex = require(process.argv[1]);
const items = JSON.parse(require("fs").readFileSync(0, "utf8"));
for (const [where, tex, display] of items) {
  try { katex.renderToString(tex, {displayMode: display, throwOnError: true, strict: "ignore"}); }
  catch (e) { console.log(where + ": KaTeX cannot render: " + e.message.split("\n")[0]); }
}
"""


def check_math(site: pathlib.Path) -> list[str]:
    """Every formula of the built site compiles with the vendored KaTeX (needs ``node``;
    skipped with a note when it is not installed)."""
    node = shutil.which("node")
    katex = ROOT / "docs" / "assets" / "katex" / "katex.min.js"
    if node is None:
        print("check_docs: node not found, formulas not compiled", file=sys.stderr)
        return []
    items = []
    for page in sorted(site.rglob("*.html")):
        raw = page.read_text(encoding="utf-8")
        for m in ARITHMATEX.finditer(raw):
            tex = html.unescape(m.group(2)).strip()
            lineno = raw.count("\n", 0, m.start()) + 1
            where = f"{page.relative_to(site)}:{lineno}"
            if tex.startswith("\\(") and tex.endswith("\\)"):
                items.append((where, tex[2:-2], False))
            elif tex.startswith("\\[") and tex.endswith("\\]"):
                items.append((where, tex[2:-2], True))
            else:
                items.append((where, "\\unrecognisedDelimiters", False))
    out = subprocess.run(
        [node, "-e", _KATEX_JS, str(katex)],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        check=False,
    )
    problems = [line for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0:
        problems.append(f"node failed: {out.stderr.strip()[:300]}")
    return problems


#: Findings of the site check that are known and owned elsewhere, with why: (page, the
#: start of the message after ``page:line: ``). An allowance that no longer matches any
#: finding is itself reported, so the list cannot go stale.
KNOWN_SITE_PROBLEMS: dict[tuple[str, str], str] = {
    ("api/models/index.html", "a list ran into a paragraph"): (
        "the module docstring of tfp_sgmcmc/models/data_files.py indents its '*' lists under "
        "definition-style lines, which Markdown reads as running text"
    ),
}


def apply_known_site_problems(problems: list[str]) -> list[str]:
    """``problems`` less the known ones, plus one line per allowance that matched none."""
    used: set[tuple[str, str]] = set()
    kept = []
    for p in problems:
        page, _, rest = p.partition(":")
        message = rest.partition(": ")[2]
        key = next((k for k in KNOWN_SITE_PROBLEMS if k[0] == page and message.startswith(k[1])),
                   None)
        if key is None:
            kept.append(p)
        else:
            used.add(key)
    for key in KNOWN_SITE_PROBLEMS.keys() - used:
        kept.append(f"{key[0]}: known problem {key[1]!r} no longer found; remove its allowance")
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=pathlib.Path, help="also check this built mkdocs site")
    args = parser.parse_args(argv)
    files = tracked_files()
    problems = check_citations(files) + check_wording(files)
    if args.site is not None:
        problems += apply_known_site_problems(check_site(args.site)) + check_math(args.site)
    for p in problems:
        print(p)
    print(f"check_docs: {len(files)} files, {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
