"""The committed quick study pages are what the current code writes.

Each MAMBA study script's ``--quick`` run has deterministic budgets (per-example gradient
evaluations or steps) and fixed seeds, so its page's tables repeat exactly up to the last
bits of floating point. Each test reruns one script with ``--quick --out <tmp>`` (from a
temporary working directory) and compares every table of the page it writes with the
committed ``docs/studies/<name>_quick.md``, row by row: the same headers, the same text
(arms, picks, yes/no) and numbers equal within a relative ``1e-3`` or one unit of the last
printed digit. Wall-clock columns (headers such as ``sampling s``, ``time ratio``) and the
lines outside the tables (the provenance line, the wall time) are not compared. A power
check shows that the comparison fails when one number of a committed table changes.

The last bits of floating point depend on the processor (vector widths and kernel choices
differ between, say, Intel Xeon and AMD EPYC), and a chain amplifies them over its steps: on
another processor the draws are a different, equally valid realisation. The arms, picks,
accuracies and every other number still repeat, but a kernel Stein discrepancy of a few
dozen thinned draws does not. So the KSD columns are compared only when the processor named
in the page's provenance line (``N × <processor>, <system>``) is this one; every other
column is compared on any processor.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "docs" / "studies"

#: (script, page written under ``--out``/studies/).
PAGES = {
    "mamba_logistic_study.py": "mamba_logistic_quick.md",
    "mamba_bnn_digits.py": "mamba_bnn_digits_quick.md",
    "mamba_pmf_study.py": "mamba_pmf_quick.md",
    "mamba_tuning_cost.py": "mamba_tuning_cost_quick.md",
}

RTOL = 1e-3
_NUMBER = re.compile(r"[-−+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:e[-+−]?\d+)?")
#: Headers of columns measured in seconds (or derived from seconds): not compared.
_SECONDS = re.compile(r"(?:^|[\s/(])s(?:$|[\s)])|seconds|time ratio|wall")


def tables(page: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table of ``page``: (header cells, body rows of cells)."""
    out: list[tuple[list[str], list[list[str]]]] = []
    lines = page.splitlines()
    i = 0
    while i < len(lines):
        if (
            lines[i].startswith("|")
            and i + 1 < len(lines)
            and re.fullmatch(r"\|(?:\s*-+\s*\|)+", lines[i + 1].strip())
        ):
            header = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            body = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                body.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            out.append((header, body))
        else:
            i += 1
    return out


def _value(token: str) -> tuple[float, float]:
    """A printed number and one unit of its last printed digit."""
    t = token.replace("−", "-").replace(",", "")
    mantissa, _, exponent = t.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    scale = 10.0 ** (int(exponent) if exponent else 0)
    return float(t), 10.0**-decimals * scale


def cells_match(a: str, b: str) -> bool:
    """The same text around the numbers, and each number within the tolerance."""
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b)):
        (u, du), (v, dv) = _value(x), _value(y)
        if math.isnan(u) and math.isnan(v):
            continue
        if abs(u - v) > max(RTOL * max(abs(u), abs(v)), 1.0001 * max(du, dv)):
            return False
    return True


#: Headers of the Stein-discrepancy columns, compared on the page's own processor only.
_KSD = re.compile(r"KSD")
_PROCESSOR = re.compile(r"\d+ × (.+?), (?:Linux|Darwin|Windows)")


def processor(page: str) -> str | None:
    """The processor named in ``page``'s provenance line, or ``None``."""
    m = _PROCESSOR.search(page)
    return m.group(1) if m else None


def differences(new: str, old: str, same_processor: bool = True) -> list[str]:
    """Where the tables of ``new`` differ from those of ``old`` (empty: they agree); the KSD
    columns are compared only when ``same_processor``."""
    tn, to = tables(new), tables(old)
    if len(tn) != len(to):
        return [f"{len(tn)} tables, committed {len(to)}"]
    out = []
    for k, ((hn, bn), (ho, bo)) in enumerate(zip(tn, to)):
        if hn != ho:
            out.append(f"table {k}: header {hn} != {ho}")
            continue
        if len(bn) != len(bo):
            out.append(f"table {k}: {len(bn)} rows, committed {len(bo)}")
            continue
        for rn, ro in zip(bn, bo):
            if len(rn) != len(ro):
                out.append(f"table {k}: row {rn} != {ro}")
                continue
            for h, a, b in zip(hn, rn, ro):
                if _SECONDS.search(h) or (not same_processor and _KSD.search(h)):
                    continue
                if not cells_match(a, b):
                    out.append(f"table {k}, column {h!r}: {a!r} != committed {b!r} (row {ro})")
    return out


def _run(script: str, tmp_path: Path) -> str:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), "--quick", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return (out / "studies" / PAGES[script]).read_text(encoding="utf-8")


@pytest.mark.parametrize("script", sorted(PAGES))
def test_quick_page_is_regenerated_by_the_current_code(script: str, tmp_path: Path) -> None:
    committed = (STUDIES / PAGES[script]).read_text(encoding="utf-8")
    assert tables(committed), "the committed page has no table"
    new = _run(script, tmp_path)
    here, there = processor(new), processor(committed)
    assert here and there, "a page names no processor in its provenance line"
    problems = differences(new, committed, same_processor=here == there)
    assert not problems, (
        f"docs/studies/{PAGES[script]} differs from what `python examples/{script} --quick "
        f"--write-docs` writes now (on {here}; the page was written on {there}):\n"
        + "\n".join(problems[:20])
    )


def _changed(page: str, header_pred, change) -> str:
    """``page`` with the first cell of a compared column (``header_pred``) changed."""
    lines = page.splitlines()
    for i, ln in enumerate(lines[:-1]):
        if ln.startswith("|") and re.fullmatch(r"\|(?:\s*-+\s*\|)+", lines[i + 1].strip()):
            header = [c.strip() for c in ln.strip().strip("|").split("|")]
            for j, h in enumerate(header):
                row = [c.strip() for c in lines[i + 2].strip().strip("|").split("|")]
                if header_pred(h) and not _SECONDS.search(h) and change(row[j]) != row[j]:
                    row[j] = change(row[j])
                    lines[i + 2] = "| " + " | ".join(row) + " |"
                    return "\n".join(lines)
    raise AssertionError("no cell to change")


@pytest.mark.parametrize("page", sorted(PAGES.values()))
def test_comparison_fails_on_a_changed_page(page: str) -> None:
    committed = (STUDIES / page).read_text(encoding="utf-8")
    assert differences(committed, committed) == []

    def bump(cell: str) -> str:  # one number up by 1%
        m = _NUMBER.search(cell)
        if not m:
            return cell
        v, _ = _value(m.group())
        return cell[: m.start()] + f"{1.01 * v + 1e-6:.6g}" + cell[m.end() :]

    assert differences(_changed(committed, lambda h: "KSD" in h, bump), committed)
    # A different pick (text, not a number) is a difference too.
    other_pick = _changed(committed, lambda h: "arm" in h, lambda c: c + " (changed)")
    assert differences(other_pick, committed)
    # On another processor a KSD may move, but a pick or any other number may not.
    assert processor(committed), "the page names no processor"
    assert differences(_changed(committed, lambda h: "KSD" in h, bump), committed, False) == []
    assert differences(other_pick, committed, same_processor=False)
    not_ksd = _changed(committed, lambda h: "KSD" not in h and "arm" not in h, bump)
    if differences(not_ksd, committed):  # a bump the comparison sees (not a 0 → 1e-6)
        assert differences(not_ksd, committed, same_processor=False)
    # Seconds columns and the lines outside the tables are not compared.
    moved = committed.replace("This run:", "This run (elsewhere):")
    assert differences(moved, committed) == []
