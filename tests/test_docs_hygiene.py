"""Documentation hygiene (``.ci/check_docs.py``) as part of the test command.

The repository must cite only documents it contains, and its text must not
speak of how the project was made. The checker's own patterns are tested for
power: each must flag a planted violation.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("check_docs", ROOT / ".ci" / "check_docs.py")
check_docs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(check_docs)

pytestmark = pytest.mark.skipif(
    not (ROOT / ".git").exists(), reason="needs a git checkout (git ls-files)"
)


@pytest.fixture(scope="module")
def files() -> list[str]:
    return check_docs.tracked_files()


def test_every_cited_document_exists_in_the_repository(files):
    problems = check_docs.check_citations(files)
    assert not problems, "\n".join(problems)


def test_no_wording_about_how_the_project_was_made(files):
    problems = check_docs.check_wording(files)
    assert not problems, "\n".join(problems)


def test_algorithms_reference_defines_the_anchors_the_code_cites():
    anchors = check_docs._anchors(ROOT / "docs" / "algorithms.md")
    for anchor in (
        "conventions",
        "sgld",
        "psgld",
        "sghmc",
        "sgnht",
        "msgld",
        "asgld",
        "sgld-sa",
        "structured",
        "ksd",
        "fssd",
        "mamba",
        "stationary-laws",
        "discrepancies",
        "lagged-momentum",
        "step-size-forms",
        "temperature",
        "n-over-n-scaling",
    ):
        assert anchor in anchors, anchor


@pytest.mark.parametrize(
    "line",
    [
        # Built from pieces so that this file does not itself name the outside documents.
        "see " + "ALGORITHMS" + ".md §7.1",
        "see ``../" + "DESIGN" + ".md``",
        "measured: " + "deps" + "-notes.md",
        "supplement = seed paper 003",
        "the README's main job",
        "## Earlier runs (session 1)",
        "figures quoted in issue 2",
    ],
)
def test_checker_flags_planted_violations(tmp_path, monkeypatch, line):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(f"# Page\n\n{line}\n")
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    found = check_docs.check_citations(["docs/page.md"]) + check_docs.check_wording(
        ["docs/page.md"]
    )
    assert found, line


def test_checker_flags_missing_files_and_anchors(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "algorithms.md").write_text("# A\n\n## SGLD {#sgld}\n")
    (tmp_path / "docs" / "page.md").write_text(
        "[ok](algorithms.md#sgld) [gone](missing.md) [bad](algorithms.md#nope)\n"
        "`docs/algorithms.md#sgld` `docs/nowhere.md` `tfp_sgmcmc/none.py`\n"
    )
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    monkeypatch.setattr(check_docs, "_TRACKED", ["docs/algorithms.md", "docs/page.md"])
    found = check_docs.check_citations(["docs/page.md"])
    assert len(found) == 4, found
    assert any("missing.md" in p for p in found)
    assert any("#nope" in p for p in found)
    assert any("docs/nowhere.md" in p for p in found)
    assert any("tfp_sgmcmc/none.py" in p for p in found)


def test_site_check_flags_roles_and_raw_math(tmp_path):
    (tmp_path / "ok.html").write_text(
        '<p>fine <span class="arithmatex">\\(x^2\\)</span> and <code>$x_1$</code></p>'
    )
    assert check_docs.check_site(tmp_path) == []
    (tmp_path / "bad.html").write_text(
        "<p>see :class:<code>Foo</code> and $\\theta_t$ and \\(y\\)</p>"
    )
    found = check_docs.check_site(tmp_path)
    assert len(found) == 3, found


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_math_check_compiles_formulas_with_the_vendored_katex(tmp_path):
    (tmp_path / "ok.html").write_text(
        '<p><span class="arithmatex">\\(\\frac{a}{b} + \\sqrt{2\\varepsilon T}\\)</span></p>'
        '<div class="arithmatex">\\[\\theta_{t+1} = \\theta_t\\]</div>'
    )
    assert check_docs.check_math(tmp_path) == []
    (tmp_path / "bad.html").write_text('<p><span class="arithmatex">\\(\\frac{a}\\)</span></p>')
    found = check_docs.check_math(tmp_path)
    assert len(found) == 1 and "bad.html" in found[0], found


def test_site_check_flags_literal_fences_broken_lists_and_plain_code(tmp_path):
    # What a correct build looks like: highlighted code (fences inside code are fine),
    # lists as lists, and a number followed by a dot inside a sentence.
    (tmp_path / "ok.html").write_text(
        '<div class="highlight"><pre><span></span><code>```python\nx = 1\n```</code></pre></div>'
        "<ol><li>first</li><li>second</li></ol><p>as in version\n2.0 and in step 2. of it</p>"
        '<ol class="references"><li value="1">A. Author. A title.</li></ol>'
    )
    assert check_docs.check_site(tmp_path) == []
    # What the site looked like with list-item code blocks that did not render: the fence
    # as text, the list's next items run into the paragraph, a reference list run together,
    # and code without highlighting.
    (tmp_path / "bad.html").write_text(
        "<p>For your own loop:</p>\n<p>```python\nimport numpy as np\n```</p>\n"
        "<p>Run the driver:\n3. Run the driver on any node\n- and a bullet</p>\n"
        "<p>[1]: A. Author. A title.\n[2]: B. Author. Another title.</p>\n"
        "<pre><code>x = 1\n</code></pre>\n<p><code>python\nx = 1</code></p>\n"
    )
    found = check_docs.check_site(tmp_path)
    assert all(p.startswith("bad.html:") for p in found), found
    assert sum("literal code fence" in p for p in found) == 2, found
    assert sum("a list ran into a paragraph" in p for p in found) == 4, found
    assert sum("without syntax highlighting" in p for p in found) == 1, found
    assert any("bad.html:6:" in p and "3. Run the driver" in p for p in found), found


def test_known_site_problems_are_filtered_and_cannot_go_stale(monkeypatch):
    key = ("api/x/index.html", "a list ran into a paragraph")
    monkeypatch.setattr(check_docs, "KNOWN_SITE_PROBLEMS", {key: "owned elsewhere"})
    known = "api/x/index.html:7: a list ran into a paragraph (line starts ...): '* a'"
    other = "api/y/index.html:7: a list ran into a paragraph (line starts ...): '* a'"
    assert check_docs.apply_known_site_problems([known, other]) == [other]
    stale = check_docs.apply_known_site_problems([other])
    assert stale[0] == other and "no longer found" in stale[1]


def _markdown_extensions() -> tuple[list[str], dict]:
    """The Markdown extensions and their options, as mkdocs.yml configures them (plus the
    three that MkDocs always adds)."""
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    names, options = ["toc", "tables", "fenced_code"], {}
    for ext in config["markdown_extensions"]:
        name, opts = next(iter(ext.items())) if isinstance(ext, dict) else (ext, None)
        if name not in names:
            names.append(name)
        if opts:
            options[name] = opts
    return names, options


def test_the_site_config_renders_code_in_lists_and_highlights_it(tmp_path):
    """The page shapes that rendered as run-on text (a fenced block inside a list item, a
    numbered list whose items hold code and paragraphs) render as code and lists with the
    site's Markdown extensions; without ``pymdownx.superfences`` the fences stay literal."""
    pytest.importorskip("pymdownx")
    markdown = pytest.importorskip("markdown")
    names, options = _markdown_extensions()
    page = (
        "Steps:\n\n"
        "1. Install the environment on every node.\n"
        "2. Start Ray on the head node:\n\n"
        "    ```bash\n    ray start --head\n    ```\n\n"
        "    A paragraph of step 2.\n\n"
        "3. Run the driver:\n\n"
        "    ```python\n    import ray\n    ray.init()\n    ```\n\n"
        "Notes:\n\n"
        "- A bullet with code:\n\n"
        "    ```python\n    x = 1\n    ```\n\n"
        "- Another bullet.\n"
    )
    rendered = markdown.markdown(page, extensions=names, extension_configs=options)
    (tmp_path / "page.html").write_text(rendered, encoding="utf-8")
    assert check_docs.check_site(tmp_path) == [], rendered
    assert rendered.count('highlight"><pre>') == 3, rendered
    assert rendered.count("<li>") == 5, rendered
    # Power: the same page without superfences leaves its fences as text.
    plain = [n for n in names if n not in ("pymdownx.superfences",)]
    rendered = markdown.markdown(
        page, extensions=plain, extension_configs={k: v for k, v in options.items() if k in plain}
    )
    (tmp_path / "page.html").write_text(rendered, encoding="utf-8")
    assert any("literal code fence" in p for p in check_docs.check_site(tmp_path))


def test_docstring_reference_lists_become_numbered_lists(tmp_path):
    spec = importlib.util.spec_from_file_location("references", ROOT / "docs/hooks/references.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    html = (
        "<h4>References</h4>\n<p>[1]: Max Welling and Yee Whye Teh. Bayesian learning via\n"
        "     stochastic gradient Langevin dynamics. In <em>ICML</em>, 2011.\n"
        "[2]: Jeremie Coullon, Leah South and Christopher Nemeth. Efficient and\n"
        "     generalizable tuning strategies. 2023.</p>\n<p>Text that cites [1].</p>"
    )
    out = hook.on_page_content(html, page=None, config=None, files=None)
    assert '<ol class="references">' in out
    assert '<li value="1">Max Welling and Yee Whye Teh. Bayesian learning via stochastic' in out
    assert '<li value="2">Jeremie Coullon' in out and "<p>Text that cites [1].</p>" in out
    assert "[2]:" not in out
    # The site check passes the rewritten page and flags the paragraph the hook rewrites.
    (tmp_path / "page.html").write_text(out, encoding="utf-8")
    assert check_docs.check_site(tmp_path) == []
    (tmp_path / "page.html").write_text(html, encoding="utf-8")
    assert len(check_docs.check_site(tmp_path)) == 2


#: A path into a folder of the source repository that the installed package does not have.
_SOURCE_ONLY = re.compile(r"(?<![\w./-])(?:examples|benchmarks|tests)/")
#: Pages exempt from the source-repository note: study pages are written by their example
#: scripts (the studies index carries the note for them); the Keras page does not carry it yet.
_SOURCE_NOTE_EXEMPT = ("docs/keras.md",)


def source_note_problems(root: pathlib.Path) -> list[str]:
    problems = []
    for page in sorted((root / "docs").rglob("*.md")):
        rel = page.relative_to(root).as_posix()
        if rel in _SOURCE_NOTE_EXEMPT or (
            rel.startswith("docs/studies/") and page.name != "index.md"
        ):
            continue
        text = page.read_text(encoding="utf-8")
        m = _SOURCE_ONLY.search(text)
        if m and "source repository" not in text:
            line = text.count("\n", 0, m.start()) + 1
            problems.append(
                f"{rel}:{line}: names {m.group(0)!r}, which a pip install does not have, and "
                "never says it is in the source repository"
            )
    return problems


def test_pages_say_where_examples_benchmarks_and_tests_are(tmp_path):
    assert source_note_problems(ROOT) == []
    # Power: a page that sends the reader to examples/ without saying where it is.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# P\n\nRun `python examples/x.py`.\n")
    assert len(source_note_problems(tmp_path)) == 1
    (tmp_path / "docs" / "page.md").write_text(
        "# P\n\nRun `python examples/x.py` from the source repository.\n"
    )
    assert source_note_problems(tmp_path) == []
