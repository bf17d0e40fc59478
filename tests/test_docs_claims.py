"""The figures that the README and ``docs/benchmarks.md`` quote match the committed results.

A table in a page is a copy of a JSON file that a benchmark wrote; when the benchmark is rerun
and the JSON changes, or a row is edited by hand, the copy and the file disagree and a reader
cannot tell which to believe. Each test here reads a table (or a sentence) from the page and
the file it cites, and compares every figure at the precision the page prints.
"""

from __future__ import annotations

import decimal
import functools
import json
import pathlib
import re
import tomllib
from collections.abc import Callable

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "docs" / "benchmarks.md"


def _json(rel: str) -> dict:
    return json.loads((ROOT / rel).read_text(encoding="utf-8"))


def table_after(text: str, header_start: str) -> list[list[str]]:
    """The body rows (cells stripped) of the first Markdown table whose header row starts
    with ``header_start``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header_start) and i + 1 < len(lines) and lines[i + 1].startswith("|-"):
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    raise AssertionError(f"no table with a header starting {header_start!r}")


def _err(x: float) -> str:
    return f"{x:.3f}"


def _ratio(lo: float, hi: float) -> str:
    return f"{lo:.2f}–{hi:.2f}"


def half_up(value: float | decimal.Decimal, decimals: int) -> str:
    """``value`` with thousands separators and ``decimals`` decimals, a half rounded up, as the
    page prints a stored figure (Python's own format rounds a stored ``1246.5`` to even,
    ``1,246``)."""
    exact = value if isinstance(value, decimal.Decimal) else decimal.Decimal(repr(value))
    return f"{exact.quantize(decimal.Decimal(1).scaleb(-decimals), decimal.ROUND_HALF_UP):,f}"


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: scikit-learn posteriors (benchmarks/real_posteriors/sample_posterior.json)

SKLEARN_ROWS = {
    "diabetes, linear (as shipped: centred, sd 0.048)": "diabetes-linear",
    "diabetes, linear, raw predictors (uncentred)": "diabetes-raw-linear",
    "diabetes, Student-t, raw, unknown `nu`": "diabetes-raw-student",
    "breast cancer, logistic, raw (sd 0.003–569)": "breast-cancer-logistic",
    "wine, softmax (3 classes), raw (sd 0.12–314)": "wine-softmax",
}


def sample_posterior_cell(run: dict) -> str:
    """How the sklearn table writes one ``bench_sample_posterior`` run: verdict, mean error,
    sd ratio and whole seconds; a run that raised or failed gives its verdict and reason."""
    seconds = f"{run['seconds']:.0f}"
    if run["verdict"] == "raised":
        return f"raised (every tuning arm diverged), {seconds}"
    if run["verdict"] == "failed":
        return f"failed ({_failed_reason(run)}), {seconds}"
    err, sd = _err(run["max_mean_error"]), _ratio(run["sd_ratio_min"], run["sd_ratio_max"])
    return f"{run['verdict']}, {err}, {sd}, {seconds}"


def _failed_reason(run: dict) -> str:
    reasons = " ".join(run["reasons"])
    return "a chain left the posterior" if "left the posterior" in reasons else reasons


def _sklearn_runs() -> dict[tuple[str, str], dict]:
    doc = _json("benchmarks/real_posteriors/sample_posterior.json")
    return {(r["posterior"], r["dtype"]): r for r in doc["results"]}


def test_sklearn_table_matches_its_json():
    rows = table_after(BENCHMARKS_MD.read_text(encoding="utf-8"), "| posterior | N × d | NUTS")
    runs = _sklearn_runs()
    assert {r[0] for r in rows} == set(SKLEARN_ROWS)
    problems = []
    for row in rows:
        name = SKLEARN_ROWS[row[0]]
        for dtype, cell in (("float64", row[3]), ("float32", row[4])):
            want = sample_posterior_cell(runs[(name, dtype)])
            if cell != want:
                problems.append(f"{row[0]} ({dtype}): page {cell!r}, JSON {want!r}")
    assert not problems, "\n".join(problems)


def test_sklearn_summary_sentence_counts_the_ok_runs():
    runs = _sklearn_runs()
    ok = {
        dtype: sum(r["verdict"] == "ok" and r["accurate"] for (_, dt), r in runs.items()
                   if dt == dtype)
        for dtype in ("float64", "float32")
    }  # fmt: skip
    words = {0: "none", 1: "one", 2: "two", 3: "three", 4: "four", 5: "all"}
    text = " ".join(BENCHMARKS_MD.read_text(encoding="utf-8").split())
    claim = (
        f"{words[ok['float64']]} of the five are accurate and `ok` in float64 and "
        f"{words[ok['float32']]} in float32"
    )
    assert claim in text, claim


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: posteriordb (benchmarks/results/posteriordb_sample_posterior*.json)

POSTERIORDB_ROWS = {
    "diamonds": "diamonds-diamonds",
    "kidiq (interaction)": "kidiq-kidscore_interaction",
    "nes2000": "nes2000-nes",
    "sblrc": "sblrc-blr",
}


def _by_posterior(rel: str) -> dict[str, dict]:
    return {r["posterior"]: r for r in _json(rel)["results"]}


def test_posteriordb_tables_match_their_json():
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    dense = _by_posterior("benchmarks/results/posteriordb_sample_posterior.json")
    windowed = _by_posterior("benchmarks/results/posteriordb_sample_posterior_windowed.json")
    problems = []

    def same(where: str, page: str, want: str) -> None:
        if page != want:
            problems.append(f"{where}: page {page!r}, JSON {want!r}")

    for row in table_after(text, "| posterior | N | d | verdict"):
        r = dense[POSTERIORDB_ROWS[row[0]]]
        want = [f"{r['N']:,}", str(r["d"]), r["verdict"], _err(r["max_mean_error"]),
                _ratio(r["sd_ratio_min"], r["sd_ratio_max"]), f"{r['seconds']:.1f}",
                _err(r["nuts_max_mean_error"]),
                _ratio(r["nuts_sd_ratio_min"], r["nuts_sd_ratio_max"]),
                f"{r['nuts_seconds']:.1f}"]  # fmt: skip
        same(row[0], " | ".join(row[1:]), " | ".join(want))
    for row in table_after(text, "| posterior | `sample_posterior` seconds"):
        r = windowed[POSTERIORDB_ROWS[row[0]]]
        want = [f"{r['seconds']:.1f}", _err(r["nuts_max_mean_error"]),
                _ratio(r["nuts_sd_ratio_min"], r["nuts_sd_ratio_max"]),
                f"{r['nuts_seconds']:.1f}"]  # fmt: skip
        same(row[0] + " (windowed)", " | ".join(row[1:]), " | ".join(want))
    for row in table_after(text, "| posterior | mode | curvature"):
        r = dense[POSTERIORDB_ROWS[row[0]]]
        keys = ("map", "curvature", "tuning_sampling", "tuning_metric", "sampling", "verdict")
        want = [f"{r['seconds_' + k]:.1f}" for k in keys]
        same(row[0] + " (phases)", " | ".join(row[1:]), " | ".join(want))
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: 10⁶ rows (benchmarks/results/sample_posterior_large_1e6.json)


def test_million_rows_table_and_ratio_match_their_json():
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    d = _json("benchmarks/results/sample_posterior_large_1e6.json")
    sp, nuts = d["sample_posterior"], d["nuts_dense"]
    rows = table_after(text, "| | wall s | worst mean error (sd)")
    assert rows[0][1:4] == [
        f"**{sp['seconds']:.1f}**",
        _err(sp["max_mean_error"]),
        _ratio(sp["sd_ratio_min"], sp["sd_ratio_max"]),
    ]
    assert f"`{sp['verdict']}`" in rows[0][0] and f"ε = {sp['step_size']}" in rows[0][0]
    assert rows[1][1:4] == [
        f"{nuts['seconds']:,.1f}",
        _err(nuts["max_mean_error"]),
        _ratio(nuts["sd_ratio_min"], nuts["sd_ratio_max"]),
    ]
    assert f"{nuts['mean_leapfrogs']:.1f} leapfrogs" in rows[1][4]
    assert f"({nuts['num_warmup']} + {nuts['num_results']})" in rows[1][0]
    ratio = d["wall_ratio_sample_posterior_over_nuts"]
    assert f"**Wall-time ratio {ratio:.3f}**" in text
    phases = sp["timings"]
    sentence = (
        f"mode {phases['map']:.1f} s, curvature {phases['curvature']:.1f} s, tuning "
        f"{phases['tuning_sampling']:.1f} s of sampling"
    )
    assert sentence in " ".join(text.split()), sentence


# ---------------------------------------------------------------------------------------------
# README


README = ROOT / "README.md"


def test_readme_versions_are_the_packages_ranges():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = {re.split(r"[\[<>=]", d)[0]: d for d in deps["dependencies"]}
    text = README.read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith("Python 3."))
    py = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", deps["requires-python"])
    assert f"Python 3.{py.group(1)}–3.{int(py.group(2)) - 1}" in line
    for name, label in (("tensorflow", "TensorFlow"), ("keras", "Keras")):
        low, high = re.search(r">=([\d.]+),<([\d.]+)", pins[name]).groups()
        major, minor = high.split(".")
        assert f"{label} {low}–{major}.{int(minor) - 1}" in line, (name, pins[name], line)
    low = re.search(r">=([\d.]+)", pins["tensorflow-probability"]).group(1)
    assert f"TFP {low}" in line


def test_readme_quickstart_figures_match_the_example_and_its_study_page():
    text = " ".join(README.read_text(encoding="utf-8").split())
    example = (ROOT / "examples" / "quickstart_mamba.py").read_text(encoding="utf-8")
    # The full run's budget (the larger of the two defaults; --quick uses the smaller).
    default = r"budget = args\.budget if args\.budget is not None else ([\d.]+)"
    budgets = re.findall(default, example)
    assert budgets, "the quickstart's default budget"
    assert f"within a {max(map(float, budgets)):g}-second sampling budget" in text
    # The loaded figure is the one the study page recorded for its own run.
    page = (ROOT / "docs" / "studies" / "mamba_quickstart.md").read_text(encoding="utf-8")
    wall = re.search(r"wall time (\d+) s", page).group(1)
    load = re.search(r"1-minute load average ([\d.]+)", page).group(1)
    assert f"took {wall} s on the same kind of machine at load average {load}" in text
    # The idle figure says what it was measured on.
    assert "about 110 s on an idle 2-core Intel Xeon machine" in text


@pytest.mark.parametrize(
    "cell, run",
    [
        ("ok, 0.040, 1.01–1.05, 28", dict(verdict="ok", max_mean_error=0.0398,
                                          sd_ratio_min=1.0053, sd_ratio_max=1.05, seconds=28.1)),
        ("raised (every tuning arm diverged), 141", dict(verdict="raised", seconds=140.8,
                                                          reasons=["every arm ..."])),
    ],
)  # fmt: skip
def test_cell_format(cell, run):
    assert sample_posterior_cell(run) == cell


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: the samplers' speed tables, rendered from their JSON by the benchmark's
# own renderer (benchmarks/bench_samplers.py --render)

#: Row labels the page shortens, to the renderer's.
_LABELS = {"sgld / (b)": "sgld / gradient floor (b)", "sgld / (c)": "sgld / sample_chain_bare (c)"}


def _cells(line: str) -> list[str]:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return [c if c else "–" for c in cells]


def _label(label: str) -> str:
    return re.sub(r" \([abc]\)$", "", _LABELS.get(label, label))


@pytest.mark.parametrize(
    "result, section",
    [
        ("bench_samplers_idle.json", "## Idle run"),
        ("bench_samplers.json", "### All samplers (full run"),
    ],
)
def test_sampler_speed_tables_match_their_json(result, section, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = pytest.importorskip("bench_samplers")
    rendered = bench.render_markdown(_json(f"benchmarks/results/{result}"))
    want = {_label(r[0]): [c if c else "–" for c in r[1:]]
            for r in table_after(rendered, "| samples/s |")}  # fmt: skip
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    body = text[text.index(section) :]
    table = table_after(body, "| samples/s |")
    problems = []
    for row in table:
        label, cells = _label(row[0]), [c if c else "–" for c in row[1:]]
        if label not in want:
            problems.append(f"{row[0]}: no such row in {result}")
            continue
        for k, (page, full) in enumerate(zip(cells, want[label])):
            # The page may print a cell's figure without the renderer's ratio in brackets.
            if page not in (full, full.split(" (")[0]):
                problems.append(f"{row[0]}, column {k + 1}: page {page!r}, JSON {full!r}")
    assert table and not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: Keras predict, batched (benchmarks/results/bench_keras_predict.json)


def test_keras_predict_table_matches_its_json():
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    runs = _json("benchmarks/results/bench_keras_predict.json")["models"]
    rows = table_after(text, "| model | draws per call | `predict`, batched")
    names = {"MLP 784-100-10": "mlp", "convnet": "convnet"}
    assert [names[r[0]] for r in rows] == list(runs)
    for row in rows:
        run = runs[names[row[0]]]
        sec, ratio = run["seconds"], run["ratios"]
        assert row[1:] == [
            str(run["draws_per_call"]),
            f"{sec['batched']:.3f}",
            f"{sec['one_draw_per_call']:.3f}",
            f"{sec['keras_predict_x_draws']:.2f}",
            f"{sec['keras_predict_once']:.3f}",
            f"{ratio['keras_x_draws_over_batched']:.1f}",
            f"{ratio['one_draw_per_call_over_batched']:.2f}",
        ], row[0]


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: the cost of a minibatch draw (benchmarks/results/bench_gather*.json)

#: The draw table's rows: how each prints from a ``bench_gather.py`` group.
GATHER_ROWS = {
    "our draw, one thread (ns per row)": lambda g: f"{g['draw']['ns_per_row']:.1f}",
    "the same program on two threads at once (ns per row, both together)":
        lambda g: f"{_two_thread_ns(g):.1f}",
    "NumPy `take`, fresh random rows, one core (ns per row)":
        lambda g: f"{g['numpy_take']['random_ns_per_row']:.1f}",
    "NumPy `take`, the same rows sorted (ns per row)":
        lambda g: f"{g['numpy_take']['sorted_ns_per_row']:.1f}",
    "SGLD-like loop, batch drawn in its step (steps/s)":
        lambda g: f"{g['prefetch']['inline_steps_per_s']:,.0f}",
    "the same loop with the batch carried one step ahead (÷ drawn in its step)":
        lambda g: f"{g['prefetch']['carried_over_inline']:.2f}",
}  # fmt: skip


def test_gather_table_matches_its_json():
    """Each cell of the draw table is ``run 1 / run 2`` of its column's files, at 1% (the
    first group) or 0.1% (the second)."""
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    rows = table_after(text, "| | 1%, before | 1%, after |")
    runs = {
        when: [_json(f"benchmarks/results/bench_gather{tail}.json")["groups"] for tail in tails]
        for when, tails in (("before", ("_before_fix", "_before_fix_2")), ("after", ("", "_2")))
    }
    columns = [("before", 0), ("after", 0), ("before", 1), ("after", 1)]
    assert [r[0] for r in rows] == list(GATHER_ROWS)
    problems = []
    for row in rows:
        cell = GATHER_ROWS[row[0]]
        for page, (when, group) in zip(row[1:], columns):
            want = " / ".join(cell(run[group]) for run in runs[when])
            if page != want:
                problems.append(f"{row[0]} ({when}, group {group}): page {page!r}, JSON {want!r}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: every table figure, against the result files its section cites

RESULTS = ROOT / "benchmarks" / "results"
# A path in full, a bare result file name (in benchmarks/results/), or "..._2.json" (a sibling
# of a file the section names in full).
_CITED = re.compile(r"(benchmarks/[\w./-]+\.json)|(?<![\w/.])(bench_\w+\.json)|\.\.\.(_\w*?\.json)")
# A figure: thousands separators, decimals, a sign (− or -), an opening bracket; not part of
# a word, a time (07:27) or a longer number.
_FIGURE = re.compile(
    r"(?<![\w.,:])(\(?)([−-]?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\w:]|,\d|\.\d)"
)
# A file's figure as the page may print it: as stored, per mille / per million (ms, µs) or the
# other way round, or as a percentage.
_SCALES = (1, 1e3, 1e-3, 1e6, 1e-6, 100)
#: The words a section without a result file says, next to the command its table came from.
NO_RESULT_FILE = "No committed results file"

#: Figures of sections that cite result files, which the check does not find in them: figures
#: derived by hand or measured in a run whose output was not kept. Listed exactly, section by
#: section, so that a new or changed figure fails; a figure that gets its source is taken off.
NOT_FOUND_IN_CITED_FILES = {
    # Sampling steps (the library's thinning and burn-in for ε = 0.15; the JSON keeps neither)
    # and 6.936 leapfrogs × 400 × 4 chains to three significant figures.
    "## 10⁶ rows: `sample_posterior` against NUTS {#million-rows}": ("7,070", "11,100"),
    # The pack_rows A/B and the draw's parts: interleaved timings in one process, not kept.
    "## Row-packed gathers": ("2,781", "-8", "-11", "-21", "236", "201"),
    # Keras / BlackJAX before the noise change (85.5 / 163.5), and XLA's per-operation trace.
    "### Ours against the peers, one run": ("0.52", "1,197", "911", "490"),
    # The old (power-of-4) map against the new one: timings and quality, not kept.
    "## Epoch permutation: Feistel vs `index_shuffle`": (
        "566", "280", "514", "289", "108", "25", "132", "999", "1,008", "1,001", "0.0022",
        "0.0021", "632.3", "632.4", "632.3", "0.18", "0.66", "0.011", "0.97"),
}  # fmt: skip


def _two_thread_ns(group: dict) -> float:
    """``bench_gather.py``'s two overlapped calls of one group, in ns per row both gathered:
    their wall time over ``2 × draws_per_call × batch_size`` rows (the committed runs predate
    the ``ns_per_row`` the script now saves)."""
    two = group["draw_two_threads"]["two_overlapped_s"]
    return two / (2 * group["draws_per_call"] * group["batch_size"]) * 1e9


def _two_thread_ns_per_row(docs: list[dict]) -> list[float]:
    """:func:`_two_thread_ns` of every group of ``docs`` that ran the two-thread draw."""
    return [_two_thread_ns(g) for d in docs if isinstance(d, dict)
            for g in d.get("groups", []) if "draw_two_threads" in g]  # fmt: skip


def _nuts_draws_per_chain(docs: list[dict]) -> list[float]:
    """NUTS's iterations per chain in the 10⁶-row run: warm-up plus draws kept."""
    return [d["nuts_dense"]["num_warmup"] + d["nuts_dense"]["num_results"]
            for d in docs if "nuts_dense" in d]  # fmt: skip


#: Figures a section computes from its result files by a formula its text states, which the
#: check accepts as well: section → the derived numbers of its files (parsed JSON).
DERIVED = {
    "### The cost of a minibatch draw": _two_thread_ns_per_row,
    "## 10⁶ rows: `sample_posterior` against NUTS {#million-rows}": _nuts_draws_per_chain,
}


def _siblings(named: pathlib.Path, tail: str) -> list[pathlib.Path]:
    """The files that ``...<tail>`` next to ``named`` may mean: ``named``'s stem (without a
    run number ``_2``) up to where ``tail`` takes over, then ``tail``. Next to ``x.json``,
    ``..._2.json`` is ``x_2.json``; next to ``x_floor.json``, ``..._floor_2.json`` is
    ``x_floor_2.json``."""
    stem = re.sub(r"_\d+$", "", named.stem)
    cuts = [k for k in range(len(stem) + 1) if tail.startswith(stem[k:])]
    return [named.with_name(stem[:k] + tail) for k in cuts]


def page_sections(text: str) -> list[tuple[str, str, list[pathlib.Path]]]:
    """``(heading, text, result files)`` of every ``##`` and ``###`` section; a ``###`` section
    also reads the files its ``##`` section cites."""
    out: list[tuple[str, str, list[pathlib.Path]]] = []
    parent: list[pathlib.Path] = []
    for part in re.split(r"(?m)^(?=#{2,3} )", text):
        head = part.splitlines()[0] if part else ""
        if not head.startswith("##"):
            continue
        found = _CITED.findall(part)
        named = [ROOT / full if full else RESULTS / bare for full, bare, _ in found if full or bare]
        files: list[pathlib.Path] = []
        for full, bare, tail in found:
            if full or bare:
                paths = [ROOT / full if full else RESULTS / bare]
            else:
                paths = [q for p in named for q in _siblings(p, tail)]
            files += [p for p in dict.fromkeys(paths) if p.exists() and p not in files]
        if head.startswith("## "):
            parent = files
        else:
            files += [p for p in parent if p not in files]
        out.append((head, part, files))
    return out


def _leaves(x) -> list[float]:
    if isinstance(x, bool):
        return []
    if isinstance(x, (int, float)):
        return [float(x)]
    items = x.values() if isinstance(x, dict) else x if isinstance(x, list) else []
    return [v for item in items for v in _leaves(item)]


def _decimals(figure: str) -> int:
    return len(figure.split(".")[1]) if "." in figure else 0


@functools.cache
def _printed_forms(
    files: tuple[pathlib.Path, ...], decimals: int, derived: str = ""
) -> frozenset[str]:
    """Every way a number of ``files``, or one that ``DERIVED[derived]`` computes from them,
    prints with ``decimals`` decimals."""
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in files]
    values = {v for d in docs for v in _leaves(d)}
    values.update(DERIVED[derived](docs) if derived else ())
    forms = set()
    for v in values:
        for s in _SCALES:
            # Python rounds a stored half to even (1246.5 prints 1,246); a page may round it up.
            up = half_up(decimal.Decimal(repr(v)) * decimal.Decimal(repr(s)), decimals)
            forms.update((f"{v * s:,.{decimals}f}", f"{v * s:.{decimals}f}", up,
                          up.replace(",", "")))  # fmt: skip
    return frozenset(forms)


def table_figures(section: str) -> list[tuple[int, int, str, bool, str]]:
    """``(line, column, figure, second in its cell, first figure of its cell)`` of every
    figure in the body rows of a section's tables (the first column, a row's label, is not
    read)."""
    lines = section.splitlines()
    out = []
    for i, line in enumerate(lines):
        header = i + 1 < len(lines) and lines[i + 1].startswith("|-")
        if not line.startswith("|") or line.startswith("|-") or header:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for j, cell in enumerate(cells[1:], 1):
            figs = _FIGURE.findall(cell)
            for k, (bracket, sign, fig) in enumerate(figs):
                out.append((i, j, ("-" if sign else "") + fig, bool(bracket) or k > 0,
                            figs[0][2]))  # fmt: skip
    return out


def figures_not_found(section: str, files: list[pathlib.Path], head: str = "") -> list[str]:
    """The section's table figures that no number of its result files prints as. A second
    figure of a cell (``1,205 (0.89)``) may also be the ratio of its cell's first figure to
    another figure of its column (ours over a peer), to the precision both are printed at."""
    figs = table_figures(section)
    derived = head if head in DERIVED else ""
    found = {(i, j, f) for i, j, f, _, _ in figs
             if f in _printed_forms(tuple(files), _decimals(f), derived)}  # fmt: skip
    columns: dict[int, list[float]] = {}
    for _, j, f in found:
        columns.setdefault(j, []).append(float(f.replace(",", "")))
    missing = []
    for i, j, f, second, first in figs:
        if (i, j, f) in found:
            continue
        if second and first != f:
            r, x = float(f.replace(",", "")), float(first.replace(",", ""))
            tol = 0.5 * 10.0 ** -_decimals(f) + 0.006 * abs(r)  # the printed figures' rounding
            if any(y and abs(x / y - r) <= tol for y in columns.get(j, [])):
                continue
        missing.append(f)
    return missing


def claims_problems(text: str) -> list[str]:
    problems = []
    for head, section, files in page_sections(text):
        figs = table_figures(section)
        if not figs:
            continue
        if not files:
            if NO_RESULT_FILE not in section or "python " not in section:
                problems.append(f"{head}: {len(figs)} table figures, no result file cited, and "
                                f"no command marked {NO_RESULT_FILE!r}")  # fmt: skip
            continue
        missing = figures_not_found(section, files, head)
        if tuple(missing) != NOT_FOUND_IN_CITED_FILES.get(head, ()):
            names = ", ".join(p.name for p in files)
            problems.append(f"{head}: figures not in {names}: {missing}")
    return problems


def test_every_benchmarks_table_figure_is_in_its_result_files():
    """Each table figure of ``docs/benchmarks.md`` prints a number of a result file its
    section cites (at the precision printed), or its section says it has no result file and
    names its command."""
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    sections = page_sections(text)
    checked = sum(len(table_figures(s)) for _, s, files in sections if files)
    assert checked > 1000  # power: the tables are read
    assert not claims_problems(text)


def test_a_planted_wrong_figure_is_found():
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    # One figure of the posteriordb table, off by one in its last digit.
    row = next(ln for ln in text.splitlines() if ln.startswith("| ") and "| ok |" in ln)
    cells = row.split("|")
    cells[-2] = re.sub(r"(\d)(?!.*\d)", lambda m: str((int(m.group(1)) + 1) % 10), cells[-2])
    planted = text.replace(row, "|".join(cells), 1)
    assert planted != text
    problems = claims_problems(planted)
    assert len(problems) == 1 and "Real posteriors" in problems[0], problems
    # A table without a result file and without the marked command is named too.
    bare = text.replace(NO_RESULT_FILE, "No file", 1)
    assert any("no result file cited" in p for p in claims_problems(bare))


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: the samplers against BlackJAX (``bench_samplers.py --peer-command``)


#: A cell of a JSON-backed table: its text from one parsed result file and one batch size, or
#: None where the file has no such figure.
CellFn = Callable[[dict, int], "str | None"]


def _results(doc: dict, n: int) -> dict:
    return next(g["results"] for g in doc["groups"] if g["batch_size"] == n)


def _peer_run(doc: dict, n: int, sampler: str) -> dict | None:
    runs = doc.get("peer_run", {}).get("runs", [])
    return next((r for r in runs if r["sampler"] == sampler and r["batch"] == n), None)


def _over_peer(doc: dict, n: int, ours: str) -> float | None:
    """Ours over the peer's samples/s, unrounded (the file's ``ratio_ours_over_peer`` is
    rounded to three decimals, and rounding it again to two can differ in the last digit)."""
    pairs = doc.get("peer_run", {}).get("pairs", [])
    pair = next((p for p in pairs if p["batch_size"] == n and p["ours"] == ours), None)
    if pair is None:
        return None
    return _results(doc, n)[ours]["steps_per_s"] / _peer_run(doc, n, pair["peer"])["samples_per_s"]


def ours(config: str, ratio: bool = True) -> CellFn:
    """Our samples/s of ``config``, with its ratio to the peer in brackets where the file pairs
    it with one (``ratio=False``: the figure alone)."""

    def cell(doc: dict, n: int) -> str | None:
        run = _results(doc, n).get(config)
        if run is None:
            return None
        over = _over_peer(doc, n, config) if ratio else None
        figure = half_up(run["steps_per_s"], 0)
        return figure if over is None else f"{figure} ({half_up(over, 2)})"

    return cell


def peer(sampler: str) -> CellFn:
    """The peer's samples/s of ``sampler`` in the same run."""

    def cell(doc: dict, n: int) -> str | None:
        run = _peer_run(doc, n, sampler)
        return None if run is None else half_up(run["samples_per_s"], 0)

    return cell


def over_peer(config: str) -> CellFn:
    """Ours over the peer's samples/s of ``config`` in the same run."""

    def cell(doc: dict, n: int) -> str | None:
        over = _over_peer(doc, n, config)
        return None if over is None else half_up(over, 2)

    return cell


#: Rows of the samples/s tables that pair a run's configurations with BlackJAX's.
PEER_TABLE_ROWS = {
    "BlackJAX 1.7.1 `sghmc`, L = 5 (one draw per sample)": peer("sghmc_L5"),
    "BlackJAX 1.7.1 `sghmc`, L = 5": peer("sghmc_L5"),
    "BlackJAX `csgld`": peer("csgld"),
    "BlackJAX `sgld`": peer("sgld"),
    "ours, the five draws of a default sample alone": ours("sghmc_L5_draws_only"),
    "NumPy `take`, the same five draws, one core": ours("sghmc_L5_draws_numpy_take"),
    "ours, SGHMC default (one draw per leapfrog step)": ours("sghmc_L5"),
    "ours, SGHMC default (a batch per leapfrog step)": ours("sghmc_L5"),
    "ours, SGHMC default": ours("sghmc_L5"),
    "ours, SGHMC default, `sg.sample_chain`": ours("sghmc_L5"),
    "ours, SGHMC default, `tfp.mcmc.sample_chain`": ours("sghmc_L5_tfp_loop"),
    "ours, SGHMC `minibatch_per_trajectory=True`": ours("sghmc_L5_traj"),
    "ours, cSGLD": ours("csgld"),
    "ours, SGLD": ours("sgld"),
    "ours, gradient alone (evaluations/s)": ours("gradient_floor", ratio=False),
}

#: Rows of the tables with ours, BlackJAX's and their ratio at 1% / 0.1% in one cell each.
PEER_SUMMARY_ROWS = {
    label: [ours(config, ratio=False), peer(sampler), over_peer(config)]
    for label, config, sampler in (
        ("SGLD", "sgld", "sgld"),
        ("cSGLD", "csgld", "csgld"),
        ("SGHMC, L = 5, one batch per leapfrog step (default)", "sghmc_L5", "sghmc_L5"),
        ("SGHMC, L = 5, one batch per trajectory (BlackJAX's scheme)", "sghmc_L5_traj",
         "sghmc_L5"),
        ("SGHMC, L = 5, one batch per trajectory", "sghmc_L5_traj", "sghmc_L5"),
    )
}  # fmt: skip

#: The batch sizes of the logistic-regression workload: 1% and 0.1% of N = 10⁶.
_SIZES = (10_000, 1_000)
#: A column: the (result file, batch size) of each figure of its cells.
Column = tuple[tuple[str, int], ...]


def _file_major(*names: str) -> list[Column]:
    """Columns of one figure each: each file at 1%, then at 0.1%, file after file."""
    return [((name, n),) for name in names for n in _SIZES]


def _size_major(*names: str) -> list[Column]:
    """Columns of one figure each: every file at 1%, then every file at 0.1%."""
    return [((name, n),) for n in _SIZES for name in names]


def _summary(name: str) -> list[Column]:
    """Three columns (ours, the peer's, the ratio), each ``1% / 0.1%`` of one file."""
    return [tuple((name, n) for n in _SIZES)] * 3


#: The JSON-backed tables that the section-wide check alone would let through: an id, then
#: (text just before the table, its header's start, its columns, its rows). A column is the
#: (result file, batch size) of each figure of its cells, joined by `` / ``; a row is its
#: label's cell, or one cell per column.
JSON_TABLES = {
    "new samplers, samples/s": (
        "bench_new_samplers_loaded.json", "| sampler | 1% | 0.1% |",
        _file_major("bench_new_samplers_loaded"),
        {"SGLD": ours("sgld", ratio=False),
         "SGLD-SVRG (update_rate 1000)": ours("sgld_svrg", ratio=False),
         "BAOAB": ours("baoab", ratio=False),
         "BADODAB": ours("badodab", ratio=False),
         "cSGLD (512 partitions)": ours("csgld", ratio=False),
         "reSGLD, K = 2 (per cold sample)": ours("resgld_K2", ratio=False),
         "SGHMC, L = 5": ours("sghmc_L5", ratio=False)},
    ),
    "new samplers, ours/BlackJAX": (
        "Against BlackJAX 1.7.1 in the same run (ours/peer)", "| sampler | 1% | 0.1% |",
        _file_major("bench_new_samplers_loaded"),
        {"cSGLD": over_peer("csgld"),
         "SGHMC, L = 5 (ours: one batch per leapfrog step)": over_peer("sghmc_L5"),
         "SGLD": over_peer("sgld")},
    ),
    "idle, tfp.mcmc.sample_chain": (
        "`benchmarks/results/bench_sghmc_csgld_vs_blackjax_idle.json`)",
        "| sampler | ours 1% / 0.1%", _summary("bench_sghmc_csgld_vs_blackjax_idle"),
        PEER_SUMMARY_ROWS,
    ),
    "after the change, loaded": (
        "**After the change, loaded**", "| sampler | ours 1% / 0.1%",
        _summary("bench_sghmc_csgld_vs_blackjax_loaded"), PEER_SUMMARY_ROWS,
    ),
    "idle, second machine kind": (
        "**Idle run on a second machine kind**", "| sampler | ours 1% / 0.1%",
        _summary("bench_sghmc_csgld_vs_blackjax_idle_epyc"), PEER_SUMMARY_ROWS,
    ),
    "idle, runs 2 and 3": (
        "Two more idle runs on 2026-11-26", "| sampler | ours/BlackJAX, run 2",
        [tuple((name, n) for n in _SIZES) for name in ("bench_csgld_vs_blackjax_idle_epyc_2",
                                                       "bench_sghmc_csgld_vs_blackjax_idle_epyc_3")],
        {"cSGLD": over_peer("csgld"), "SGHMC, default": over_peer("sghmc_L5"),
         "SGHMC, one batch per trajectory": over_peer("sghmc_L5_traj")},
    ),
    "draws alone": (
        "**The draws alone, a floor for the default SGHMC.**", "| samples/s (ours/BlackJAX)",
        _file_major("bench_sghmc_draw_floor_vs_blackjax", "bench_sghmc_draw_floor_vs_blackjax_2"),
        PEER_TABLE_ROWS,
    ),
    "indices first": (
        "### SGHMC, cSGLD and SGLD against BlackJAX, after the change",
        "| samples/s (ours/BlackJAX)",
        # Run 3 ran at 0.1% only.
        [col for col in _size_major("bench_sghmc_csgld_vs_blackjax_indices_first",
                                    "bench_sghmc_csgld_vs_blackjax_indices_first_2",
                                    "bench_sghmc_csgld_vs_blackjax_indices_first_3")
         if col != (("bench_sghmc_csgld_vs_blackjax_indices_first_3", 10_000),)],
        PEER_TABLE_ROWS,
    ),
    "cache lines": (
        "### Rows on cache lines", "| samples/s (ours/BlackJAX)",
        _size_major("bench_sghmc_csgld_vs_blackjax_cache_lines",
                    "bench_sghmc_csgld_vs_blackjax_cache_lines_2"),
        PEER_TABLE_ROWS,
    ),
    "c floor": (
        "### Where default SGHMC's time goes", "| samples/s (ours/BlackJAX)",
        _size_major("bench_sghmc_csgld_vs_blackjax_c_floor",
                    "bench_sghmc_csgld_vs_blackjax_c_floor_2"),
        PEER_TABLE_ROWS,
    ),
    "flat loop": (
        "**Default SGHMC and cSGLD against BlackJAX, through the flat loop.**",
        "| samples/s | 1%, run 1",
        _size_major("bench_sghmc_csgld_vs_blackjax_flat_loop",
                    "bench_sghmc_csgld_vs_blackjax_flat_loop_2",
                    "bench_sghmc_csgld_vs_blackjax_flat_loop_3"),
        PEER_TABLE_ROWS,
    ),
    "packed, loaded": (
        "**One run against BlackJAX, loaded**", "| sampler | ours 1% / 0.1%",
        _summary("bench_sghmc_csgld_vs_blackjax_packed_loaded"), PEER_SUMMARY_ROWS,
    ),
    "packed, falling load": (
        "A second run, started as the load fell", "| sampler | ours 1% / 0.1%",
        _summary("bench_sghmc_csgld_vs_blackjax_packed_falling_load"), PEER_SUMMARY_ROWS,
    ),
    "packed, moderate load": (
        "A third run, with both libraries under the same moderate load",
        "| sampler | ours 1% / 0.1%",
        _summary("bench_sghmc_csgld_vs_blackjax_packed_load2"), PEER_SUMMARY_ROWS,
    ),
}  # fmt: skip


def json_table_problems(text: str, table: str) -> list[str]:
    """Every cell of ``JSON_TABLES[table]`` in ``text`` that its result files do not print
    as: page and file side by side. Bold and the slow-state mark ``*`` are not figures."""
    anchor, header, columns, rows = JSON_TABLES[table]
    docs = {name: _json(f"benchmarks/results/{name}.json") for col in columns for name, _ in col}
    body = table_after(text[text.index(anchor) :], header)
    problems = [] if body else [f"{table}: no rows"]
    for line in body:
        label, cells = line[0], _cells("|".join(line[1:]).replace("*", ""))
        spec = rows.get(label)
        if spec is None:
            problems.append(f"{table}: row {label!r} has no source")
            continue
        fns = spec if isinstance(spec, list) else [spec] * len(columns)
        for k, (page, fn, col) in enumerate(zip(cells, fns, columns, strict=True)):
            parts = [fn(docs[name], n) for name, n in col]
            want = "–" if all(p is None for p in parts) else " / ".join(p or "–" for p in parts)
            if page != want:
                problems.append(f"{table}, {label}, column {k + 1}: page {page!r}, JSON {want!r}")
    return problems


@pytest.mark.parametrize("table", list(JSON_TABLES))
def test_json_table_matches_its_result_files(table):
    problems = json_table_problems(BENCHMARKS_MD.read_text(encoding="utf-8"), table)
    assert not problems, "\n".join(problems)


def plant_in_table(text: str, table: str) -> tuple[str, str]:
    """``text`` with the last digit of the first figure of ``JSON_TABLES[table]``'s first row
    changed by one, and that row's label."""
    anchor, header, _, _ = JSON_TABLES[table]
    start = text.index(anchor)
    lines = text[start:].splitlines(keepends=True)
    row = next(k for k, ln in enumerate(lines) if ln.startswith(header)) + 2
    cells = lines[row].split("|")
    j = next(j for j in range(2, len(cells)) if re.search(r"\d", cells[j]))
    cells[j] = re.sub(r"(\d)(?![\d,.])", lambda m: str((int(m[1]) + 1) % 10), cells[j], count=1)
    lines[row] = "|".join(cells)
    return text[:start] + "".join(lines), cells[1].strip()


@pytest.mark.parametrize("table", list(JSON_TABLES))
def test_a_planted_wrong_cell_is_found_in_its_table(table):
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    planted, label = plant_in_table(text, table)
    assert planted != text
    problems = json_table_problems(planted, table)
    assert len(problems) == 1 and f", {label}, " in problems[0], problems


def test_a_one_digit_edit_of_the_baoab_figure_is_found():
    """``1,247 -> 1,248``: 1,248 prints a number of another of the section's files (the
    section-wide check lets it through); its own table's cell is the file's 1246.5."""
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    planted = text.replace("| BAOAB | 1,247 |", "| BAOAB | 1,248 |")
    assert planted != text
    assert json_table_problems(planted, "new samplers, samples/s") == [
        "new samplers, samples/s, BAOAB, column 1: page '1,248', JSON '1,247'"
    ]
    unknown = text.replace("| BAOAB | 1,247 |", "| BAOAB, L = 3 | 1,247 |")
    assert any("no source" in p for p in json_table_problems(unknown, "new samplers, samples/s"))
