"""Documentation hygiene (``.ci/check_docs.py``) as part of the test command.

The repository must cite only documents it contains, and its text must not
speak of how the project was made. The checker's own patterns are tested for
power: each must flag a planted violation.
"""

from __future__ import annotations

import importlib.util
import pathlib
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
