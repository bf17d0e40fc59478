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
from typing import Any

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


def _check_large_data_rows(text: str, rows: list, d: dict, nuts_key: str) -> None:
    """The cells and the ratio both large-data tables share: the verdict and step size,
    NUTS's leapfrogs and draw counts, and the bold wall-time ratio."""
    sp, nuts = d["sample_posterior"], d[nuts_key]
    assert f"`{sp['verdict']}`" in rows[0][0] and f"ε = {sp['step_size']}" in rows[0][0]
    assert f"{nuts['mean_leapfrogs']:.1f} leapfrogs" in rows[1][4]
    assert f"({nuts['num_warmup']} + {nuts['num_results']})" in rows[1][0]
    ratio = d["wall_ratio_sample_posterior_over_nuts"]
    assert f"**Wall-time ratio {ratio:.3f}**" in " ".join(text.split())


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
    assert rows[1][1:4] == [
        f"{nuts['seconds']:,.1f}",
        _err(nuts["max_mean_error"]),
        _ratio(nuts["sd_ratio_min"], nuts["sd_ratio_max"]),
    ]
    _check_large_data_rows(text, rows, d, "nuts_dense")
    phases = sp["timings"]
    sentence = (
        f"mode {phases['map']:.1f} s, curvature {phases['curvature']:.1f} s, tuning "
        f"{phases['tuning_sampling']:.1f} s of sampling"
    )
    assert sentence in " ".join(text.split()), sentence


def test_hier_logistic_table_and_ratio_match_their_json():
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    d = _json("benchmarks/results/sample_posterior_large_hier_1e5.json")
    sp, nuts = d["sample_posterior"], d["nuts_windowed"]
    rows = table_after(text, "| | wall s | worst mean error (NUTS sd)")
    assert rows[0][1:4] == [
        f"**{sp['seconds']:.1f}**",
        f"{sp['max_mean_error']:.3f}",
        f"{sp['sd_ratio_min']:.2f}–{sp['sd_ratio_max']:.2f}",
    ]
    assert f"{sp['batch_size']:,}-row batches" in rows[0][0]
    assert rows[1][1] == f"{nuts['seconds']:,.1f}"
    _check_large_data_rows(text, rows, d, "nuts_windowed")
    flat = " ".join(text.split())
    assert (f"worst split R̂ {nuts['max_split_rhat']:.3f}, smallest bulk ESS "
            f"{nuts['min_ess']:,.0f}, {nuts['divergences']} divergences") in flat
    phases = sp["timings"]
    sentence = (
        f"mode {phases['map']:.1f} s, curvature {phases['curvature']:.1f} s, other modes "
        f"{phases['other_modes']:.1f} s, tuning {phases['tuning_sampling']:.1f} s of sampling"
    )
    assert sentence in flat, sentence


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
    "result, section, header",
    [
        ("bench_samplers_idle.json", "## Idle run", "| samples/s |"),
        ("bench_samplers.json", "### All samplers (full run", "| samples/s |"),
        ("bench_samplers.json", "### Against the peers, loaded", "| sampler | ours n="),
    ],
)
def test_sampler_speed_tables_match_their_json(result, section, header, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = pytest.importorskip("bench_samplers")
    rendered = bench.render_markdown(_json(f"benchmarks/results/{result}"))
    want = {_label(r[0]): [c if c else "–" for c in r[1:]]
            for r in table_after(rendered, header)}  # fmt: skip
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    body = text[text.index(section) :]
    table = table_after(body, header)
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


def test_a_planted_quoted_peer_figure_is_found(tmp_path, monkeypatch):
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    planted = text.replace("| sgld | 1,729 (random_window) |", "| sgld | 1,728 (random_window) |")
    assert planted != text
    page = tmp_path / "benchmarks.md"
    page.write_text(planted, encoding="utf-8")
    monkeypatch.setitem(globals(), "BENCHMARKS_MD", page)
    with pytest.raises(AssertionError, match="page '1,728 \\(random_window\\)'"):
        test_sampler_speed_tables_match_their_json(
            "bench_samplers.json",
            "### Against the peers, loaded",
            "| sampler | ours n=",
            monkeypatch,
        )


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
    # None: a figure whose run was not kept is not on the page (the page says so in words).
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
    """NUTS's iterations per chain in the 10⁶-row run (warm-up plus draws kept), and its
    passes over the data: mean leapfrogs × iterations × the 4 chains the row states."""
    out = []
    for d in docs:
        if "nuts_dense" in d:
            nuts = d["nuts_dense"]
            iterations = nuts["num_warmup"] + nuts["num_results"]
            out += [iterations, nuts["mean_leapfrogs"] * iterations * 4]
    return out


def _mnist_ratios_before(docs: list[dict]) -> list[float]:
    """The ratios of the MNIST run before the noise change, whose file keeps the four steps/s
    side by side but no ratio: every steps/s over every other."""
    runs = [d["steps_per_s"] for d in docs if isinstance(d.get("steps_per_s"), dict)]
    return [a / b for r in runs for a in r.values() for b in r.values() if a != b]


#: Figures a section computes from its result files by a formula its text states, which the
#: check accepts as well: section → the derived numbers of its files (parsed JSON).
DERIVED = {
    "### The cost of a minibatch draw": _two_thread_ns_per_row,
    "## 10⁶ rows: `sample_posterior` against NUTS {#million-rows}": _nuts_draws_per_chain,
    "### Ours against the peers, one run": _mnist_ratios_before,
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
    # A table without a result file and without the marked command is named too (every
    # section now cites its files: the PMF section's citations are taken out).
    assert NO_RESULT_FILE not in text
    bare = text.replace("benchmarks/results/bench_pmf.json", "its printed output")
    assert any(p.startswith("## PMF: ") and "no result file cited" in p
               for p in claims_problems(bare)), claims_problems(bare)


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: the other tables that have a result file, cell by cell (the samplers
# against BlackJAX, tf.data, the loops, MAMBA, the MNIST BNN, the permutation, the masks)


#: How a page prints a stored figure with some decimals. A stored half (``1246.5``, or a
#: ratio stored as ``1.045``) is a tie the stored figure cannot settle, and the page rounds it
#: up or as Python's format does (to the nearest binary value: ``1,246``, ``1.04``).
Fmt = Callable[[float, int], str]
ROUNDINGS: tuple[Fmt, ...] = (half_up, lambda value, decimals: f"{value:,.{decimals}f}")
#: A cell of a JSON-backed table: its text from one parsed result file and its column's key
#: (a batch size, a group), printed with one of :data:`ROUNDINGS`; None where the file has no
#: such figure.
CellFn = Callable[[dict, Any, Fmt], "str | None"]


def fig(get: Callable[[dict, Any], float | None], decimals: int | None, suffix: str = "") -> CellFn:
    """The figure ``get(doc, key)`` with ``decimals`` decimals (None: as stored), or no figure
    where it is None."""

    def cell(doc: dict, key: Any, fmt: Fmt) -> str | None:
        value = get(doc, key)
        if value is None:
            return None
        return (repr(value) if decimals is None else fmt(value, decimals)) + suffix

    return cell


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
    steps = fig(lambda doc, n: _results(doc, n).get(config, {}).get("steps_per_s"), 0)
    over = fig(lambda doc, n: _over_peer(doc, n, config), 2)

    def cell(doc: dict, n: int, fmt: Fmt) -> str | None:
        figure, bracket = steps(doc, n, fmt), over(doc, n, fmt) if ratio else None
        return figure if bracket is None else f"{figure} ({bracket})"

    return cell


def peer(sampler: str) -> CellFn:
    """The peer's samples/s of ``sampler`` in the same run."""
    return fig(lambda doc, n: (_peer_run(doc, n, sampler) or {}).get("samples_per_s"), 0)


def over_peer(config: str) -> CellFn:
    """Ours over the peer's samples/s of ``config`` in the same run."""
    return fig(lambda doc, n: _over_peer(doc, n, config), 2)


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


def in_file(name: str, cell: CellFn) -> CellFn:
    """``cell`` read from result file ``name`` instead of its column's file."""
    return lambda doc, key, fmt: cell(_json(f"benchmarks/results/{name}.json"), key, fmt)


def _at(cell: CellFn, key: Any, doc: dict, _: Any, fmt: Fmt) -> str | None:
    return cell(doc, key, fmt)


def at(key: Any, cells: list[CellFn]) -> list[CellFn]:
    """``cells`` read at their row's own key (a configuration and batch size, a run), not at
    their column's."""
    return [functools.partial(_at, cell, key) for cell in cells]


def _no_figure(doc: dict, key: Any, fmt: Fmt) -> None:
    """A cell the file has no figure for (an empty or ``–`` cell)."""


def _group(doc: dict, **where: Any) -> dict:
    """The first of ``doc``'s groups whose fields are ``where``."""
    return next(g for g in doc["groups"] if all(g.get(k) == v for k, v in where.items()))


def stat(config: str, field: str, decimals: int, scheme: str, n: int) -> CellFn:
    """``field`` of ``config`` in the ``bench_samplers.py`` group of ``scheme`` at ``n``."""
    return fig(lambda doc, _: _group(doc, scheme=scheme, batch_size=n)["results"]
               .get(config, {}).get(field), decimals)  # fmt: skip


def sgld_vs_hand_rows(bare: bool) -> dict[str, list[CellFn]]:
    """The rows ``scheme | n`` of an SGLD-against-(a) table: with the bare kernel (c), or with
    the gradient floor (b) and the load at the end of the group."""
    rows = {}
    for scheme in ("with_replacement", "epoch", "random_window"):
        for n in _SIZES:
            ours_ = [stat("sgld", "steps_per_s", 0, scheme, n),
                     stat("hand_sgld", "steps_per_s", 0, scheme, n)]  # fmt: skip
            if bare:
                rest = [stat("sample_chain_bare", "steps_per_s", 0, scheme, n),
                        stat("sgld", "ratio_to_hand_sgld", 2, scheme, n),
                        stat("sample_chain_bare", "ratio_to_hand_sgld", 2, scheme, n),
                        stat("sgld", "ratio_to_sample_chain_bare", 2, scheme, n)]  # fmt: skip
            else:
                load = fig(lambda doc, _, s=scheme, n=n: _group(doc, scheme=s, batch_size=n)
                           ["load_average_end_of_group"][0], None)  # fmt: skip
                rest = [stat("gradient_floor", "steps_per_s", 0, scheme, n),
                        stat("sgld", "ratio_to_hand_sgld", 2, scheme, n),
                        stat("sgld", "ratio_to_gradient_floor", 3, scheme, n), load]  # fmt: skip
            rows[f"{scheme} | {n:,}"] = ours_ + rest
    return rows


def best_of_idle(config: str) -> CellFn:
    """Our idle samples/s of ``config`` at 1% / 0.1% with the best scheme (``random_window``),
    then with ``with_replacement`` in brackets."""
    cells = {s: [stat(config, "steps_per_s", 0, s, n) for n in _SIZES]
             for s in ("random_window", "with_replacement")}  # fmt: skip

    def cell(doc: dict, key: Any, fmt: Fmt) -> str:
        best, rows = ([c(doc, key, fmt) for c in cells[s]] for s in cells)
        return f"{' / '.join(best)} ({' / '.join(rows)})"

    return cell


def quoted(label: str, peer_name: str) -> CellFn:
    """A quoted peer's samples/s at 1% / 0.1%, as the file records them."""

    def cell(doc: dict, key: Any, fmt: Fmt) -> str:
        one, tenth = doc["peers_quoted_samples_per_s_1pct_0.1pct"][peer_name]
        return f"{label} {fmt(one, 0)} / {fmt(tenth, 0)}"

    return cell


def tf_data(field: str, arm: str, decimals: int) -> CellFn:
    """``bench_tf_data.py --mamba``: ``field`` (steps/s or a ratio) of ``arm`` at a batch."""
    return fig(lambda doc, n: _group(doc, batch_size=n)[field][arm], decimals)


def loop_ratio(loop: str) -> CellFn:
    """``bench_loops.py``: ``loop``'s steps/s over the flat loop's, in the group ``key``."""
    return fig(lambda doc, key: _loop_group(doc, key)["results"].get(loop, {})
               .get("ratio_to_flat"), 2)  # fmt: skip


def _loop_group(doc: dict, key: tuple[str, int, int]) -> dict:
    kernel, n, thin = key
    return next((g for g in doc["groups"]
                 if (g["kernel"], g["batch_size"], g["thin"]) == key), {"results": {}})  # fmt: skip


def _loop_columns(name: str, kernels: tuple[str, ...]) -> list[Column]:
    return [((name, (k, n, thin)),) for thin in (1, 5) for k in kernels for n in _SIZES]


def vs_peers(field: str, decimals: int, threads: str = "default") -> CellFn:
    """``bench_vs_peers.py``: ``field`` of the summary row ``(config, batch)`` of our run on
    the default thread pool or one intra-op thread; a ``..._rounds`` ratio prints its median
    and, in brackets, the rounds' range."""

    def get(doc: dict, key: tuple[str, int]) -> dict:
        config, n = key
        return next(r for r in doc["summary"] if (r["config"], r["batch"]) == key
                    and r["ours"] == f"current_threads_{threads}")  # fmt: skip

    def cell(doc: dict, key: tuple[str, int], fmt: Fmt) -> str | None:
        row = get(doc, key)
        if field.endswith("_rounds"):
            rounds = row[field]
            median = row[field.replace("_rounds", "_median")]
            return f"{fmt(median, decimals)} ({fmt(min(rounds), 2)}–{fmt(max(rounds), 2)})"
        return None if field not in row else fmt(row[field], decimals)

    return cell


VS_PEERS_CELLS = [
    vs_peers("ours_samples_per_s_median", 0),
    vs_peers("ours_samples_per_s_median", 0, "1"),
    vs_peers("sgmcmcjax_samples_per_s_median", 0),
    vs_peers("blackjax_samples_per_s_median", 0),
    vs_peers("ratio_to_faster_peer_rounds", 2),
    vs_peers("ratio_to_faster_peer_rounds", 2, "1"),
]
VS_PEERS_ROWS = (("SGLD", "sgld"), ("SGLD-CV", "sgld_cv"), ("SGNHT", "sgnht"),
                 ("SGHMC, L = 5, a batch per trajectory", "sghmc_L5_traj"))  # fmt: skip


def profile(part: str, field: str, decimals: int, threads: int) -> CellFn:
    """``bench_vs_peers.py --profile``: ``field`` of ``part`` with ``threads`` intra-op
    threads (0: the default pool)."""
    return fig(lambda doc, _: next(r for r in doc["runs"] if r["intra_op_threads"] == threads)
               [part][field], decimals)  # fmt: skip


def budget(field: str, decimals: int | None) -> CellFn:
    """``bench_mamba_budget.py``: ``field`` of the run ``(sampler, T)``; the deviation with its
    sign and a percent sign."""

    def get(doc: dict, key: tuple[str, float]) -> float:
        return next(r for r in doc["runs"] if (r["sampler"], r["budget_s"]) == key)[field]

    if field != "deviation_pct":
        return fig(get, decimals)
    return lambda doc, key, fmt: (
        ("+" if get(doc, key) >= 0 else "−") + fmt(abs(get(doc, key)), decimals) + "%"
    )


BUDGET_CELLS = [
    budget("sampling_s", 2),
    budget("deviation_pct", 2),
    budget("honesty_non_diverged", 4),
    budget("diverged_arm_rounds", 0),
    budget("compile_s", 1),
    budget("metric_s", 1),
]


def _mnist_run(doc: dict, config: str) -> dict:
    """A configuration's run of ``bench_mnist_bnn.py``; the file of the run before the
    Threefry noise keeps the steps/s of all four side by side."""
    if "runs" not in doc:
        return {"steps_per_s": doc["steps_per_s"][config]}
    return next(r for r in doc["runs"] if r["config"] == config)


def mnist(config: str, decimals: int = 1, over: str = "") -> CellFn:
    """``bench_mnist_bnn.py``: the steps/s of ``config``, or with ``over`` its ratio to that
    peer's."""
    if over:
        return fig(lambda doc, _: _mnist_run(doc, config)["steps_per_s"]
                   / _mnist_run(doc, over)["steps_per_s"], 2)  # fmt: skip
    return fig(lambda doc, _: _mnist_run(doc, config)["steps_per_s"], decimals)


def mnist_cpu(config: str) -> CellFn:
    """``bench_mnist_bnn.py``: our CPU-seconds per 1,000 steps (median), where recorded."""
    return fig(lambda doc, _: _mnist_run(doc, config).get("cpu_s_per_1000_steps_median"), 1)


def joined(*cells: CellFn, sep: str = ", ") -> CellFn:
    """Several figures in one cell (None where the file has none of them)."""

    def cell(doc: dict, key: Any, fmt: Fmt) -> str | None:
        parts = [c(doc, key, fmt) for c in cells]
        return None if all(p is None for p in parts) else sep.join(p or "–" for p in parts)

    return cell


def mask(law: str, column: str, why: bool = False) -> CellFn:
    """``bench_masks.py``: one column of a law's row: whether each sampler compiles under XLA
    (the TFP one with its time per draw where the page gives it, the hand-written one with
    the op XLA lacks), whether the two give the same draws (the same z-scores: the same
    numbers), their time ratio, their optimized HLO sizes. ``why``: the op XLA lacks."""

    def cell(doc: dict, key: Any, fmt: Fmt) -> str | None:
        hand, tfp, row = doc[law]["handwritten"], doc[law]["tfp"], doc[law]
        if column == "hand":
            if hand["xla_supported"]:
                return "yes"
            return "no" + "".join(f" (`{op}` has no XLA kernel on CPU)"
                                  for op in hand["xla_error_ops"] if why)  # fmt: skip
        if column == "tfp":
            per_draw = (
                row.get("seconds_per_draw_tfp") if "tfp_over_handwritten" not in row else None
            )
            return ("yes" if tfp["xla_supported"] else "no") + (
                "" if per_draw is None else f" ({fmt(per_draw * 1e3, 1)} ms per draw)"
            )
        if column == "same":
            same = "mean_z" in hand and (hand["mean_z"], hand["var_z"]) == (
                tfp["mean_z"],
                tfp["var_z"],
            )
            return "yes, bit for bit" if same else None
        if column == "ratio":
            return (
                None if "tfp_over_handwritten" not in row else fmt(row["tfp_over_handwritten"], 2)
            )
        return " / ".join(
            str(s["hlo_instructions"]) if "hlo_instructions" in s else "–" for s in (hand, tfp)
        )

    return cell


def mnist_part(section: str, field: str, part: str) -> CellFn:
    """``bench_mnist_bnn.py --profile-only`` / ``--noise-order``: CPU or wall ms per step."""
    return fig(lambda doc, _: doc[section][field][part], 2)


def permutation(path: str, decimals: int, scale: float = 1, suffix: str = "") -> CellFn:
    """``bench_permutation.py``: the figure at ``map/field`` (times to ms with ``scale``)."""
    mapping, field = path.split("/")
    return fig(lambda doc, _: None if field not in doc[mapping] else doc[mapping][field] * scale,
               decimals, suffix)  # fmt: skip


#: The JSON-backed tables that the section-wide check alone would let through: an id, then
#: (text just before the table, its header's start, its columns, its rows[, how many cells
#: make a row's label]). A column is the (result file, key: a batch size, a group) of each
#: figure of its cells, joined by `` / ``; a row is its label's cell, one cell per column,
#: None for a row of words without figures, or why the file does not hold the row's figures.
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
        [tuple((name, n) for n in _SIZES)
         for name in ("bench_csgld_vs_blackjax_idle_epyc_2",
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
    "SGLD against (a), idle": (
        "bench_sgld_vs_hand_idle.json`,", "| scheme | n | SGLD (ours) | (a) hand |",
        [(("bench_sgld_vs_hand_idle", None),)] * 6, sgld_vs_hand_rows(bare=True), 2,
    ),
    "SGLD against (a), loaded": (
        "`benchmarks/results/bench_sgld_vs_hand.json`, 9 rounds",
        "| scheme | n | SGLD (ours) | (a) hand SGLD |",
        [(("bench_sgld_vs_hand", None),)] * 6, sgld_vs_hand_rows(bare=False), 2,
    ),
    "against the peers, idle": (
        "## Against the peers, idle", "| sampler | ours 1% / 0.1% | faster peer",
        [(("bench_samplers_idle", None),)] * 2,
        {"SGLD": [best_of_idle("sgld"), quoted("SGMCMCJax", "sgmcmcjax_sgld")],
         "SGLD-CV": [best_of_idle("sgld_cv"), quoted("SGMCMCJax", "sgmcmcjax_sgld_cv")],
         "SGHMC (L = 5)": [best_of_idle("sghmc_L5"), quoted("BlackJAX", "blackjax_sghmc_L5")],
         "SGNHT": [best_of_idle("sgnht"), quoted("BlackJAX", "blackjax_sgnht")]},
    ),
    **{
        f"MAMBA arms on tf.data, {name}": (
            anchor, "| steps/s (batch) | 1% (n = 10,000)", _file_major(name),
            {"`InMemoryData`, default `\"epoch\"` scheme, XLA":
                 tf_data("steps_per_second", "in_memory", 0),
             "`InMemoryData`, `\"random_window\"` scheme, XLA":
                 tf_data("steps_per_second", "in_memory_random_window", 0),
             "`DatasetData`, fed XLA calls (305 / 2000 steps per block)":
                 tf_data("steps_per_second", "tf_data_chunked", 0),
             "`DatasetData`, step by step in a graph (`jit_compile=False`)":
                 tf_data("steps_per_second", "tf_data_graph", 0),
             "ratio fed XLA / `\"random_window\"`":
                 tf_data("ratio", "tf_data_chunked/in_memory_random_window", 2),
             "ratio fed XLA / `\"epoch\"`": tf_data("ratio", "tf_data_chunked/in_memory", 2),
             "ratio step by step / `\"epoch\"`": tf_data("ratio", "tf_data_graph/in_memory", 2)},
        )
        for name, anchor in (("bench_tf_data_mamba_idle_epyc", "**Idle run** (AMD EPYC"),
                             ("bench_tf_data_mamba", "**Loaded runs.**"))
    },
    "full-data scores": (
        "**Full-data scores.**", "| one 64-sample block", [(("bench_tf_data_mamba", None),)],
        {label: fig(lambda doc, _, k=k: doc["full_data_score_block"][k]["seconds_per_block"], 2)
         for label, k in (
             ("`InMemoryData`, XLA", "in_memory"),
             ("`DatasetData`, full data kept in memory (the default when they fit "
              "`full_cache_bytes`), XLA", "kept"),
             ("`DatasetData`, `full_dataset` re-read in a graph (`full_cache_bytes=0`)",
              "streamed"))},
    ),
    "the draw against a C loop": (
        "`benchmarks/results/bench_gather_c_floor.json`, a slow-memory", "| ns per gathered row",
        _file_major("bench_gather_c_floor"),
        {"ours, `\"epoch\"` draw in XLA (indices, gather, read)": [
             fig(lambda doc, n: _group(doc, batch_size=n)["draw"]["ns_per_row"], 1),
             fig(lambda doc, n: _group(doc, batch_size=n)["draw"]["ns_per_row"], 1,
                 " (slow state)")],
         **{label: fig(lambda doc, n, k=k: _group(doc, batch_size=n)["c_loop"][k], 1)
            for label, k in (
                ("C, one thread", "threads_1_prefetch_0_ns_per_row"),
                ("C, two threads", "threads_2_prefetch_0_ns_per_row"),
                ("C, two threads, software prefetch 16 rows ahead",
                 "threads_2_prefetch_16_ns_per_row"))}},
    ),
    "one flat loop": (
        "## One flat loop", "| steps/s, ratio to one flat loop",
        _loop_columns("bench_loops", ("sgld", "sghmc_L5")),
        {"flat `tf.while_loop` over steps (reference)": fig(
             lambda doc, key: _loop_group(doc, key)["results"]["flat"]["ratio_to_flat"], 0),
         "the same, returning the last kernel results": in_file(
             "bench_loops_results", loop_ratio("flat_with_results")),
         "the same, each step inside an inner loop whose trip count (1) is a tensor":
             loop_ratio("nested_dynamic"),
         "the same, inner trip count the constant 1": loop_ratio("nested_static"),
         "`tfp.mcmc.sample_chain`": loop_ratio("tfp_sample_chain"),
         "`tfp.experimental.mcmc.sample_fold`": loop_ratio("tfp_sample_fold"),
         "`tfp_sgmcmc.sample_chain`": loop_ratio("sg_sample_chain")},
    ),
    "one loop for every entry point": (
        "**One loop for every entry point.**", "| ratio to one flat loop",
        _loop_columns("bench_loops_one_loop", ("sgld", "sghmc_L5")),
        {"`sg.sample_chain` (the one loop, default seed rule)": loop_ratio("sg_sample_chain"),
         "`sg.sample_chain(seed_rule=\"tfp\")` (the flat loop before)":
             loop_ratio("sg_sample_chain_tfp"),
         "a driver chunk (the one loop, returning the kernel results)":
             loop_ratio("driver_chunk"),
         "`tfp.experimental.mcmc.sample_fold` (the driver's chunks before)":
             loop_ratio("tfp_sample_fold")},
    ),
    "per-step overhead, both batches": (
        "`benchmarks/results/bench_vs_peers_loaded.json`", "| sampler | batch | ours, default",
        [(("bench_vs_peers_loaded", None),)] * 6,
        {f"{label} | {n:,}": at((config, n), VS_PEERS_CELLS)
         for label, config in VS_PEERS_ROWS for n in (1_000, 10_000)},
        2,
    ),
    "per-step overhead, 1%": (
        "`benchmarks/results/bench_vs_peers_loaded_1pct.json`", "| sampler, n = 10,000 |",
        [(("bench_vs_peers_loaded_1pct", None),)] * 6,
        {label: at((config, 10_000), VS_PEERS_CELLS) for label, config in VS_PEERS_ROWS},
    ),
    "where a step's time goes": (
        "`benchmarks/results/bench_vs_peers_profile_loaded.json`", "| n = 1,000, median of 7",
        [(("bench_vs_peers_profile_loaded", None),)] * 4,
        {label: [profile(part, "cpu_us_per_step_median", 1, 0),
                 profile(part, "cpu_us_per_step_median", 1, 1),
                 profile(part, "samples_per_s_median", 0, 0),
                 profile(part, "samples_per_s_median", 0, 1)]
         for label, part in (("SGLD", "sgld"), ("SGLD-CV", "sgld_cv"), ("SGNHT", "sgnht"),
                             ("the minibatch draw alone", "draw_alone"),
                             ("the minibatch gradient alone", "gradient_floor"))},
    ),
    "MAMBA budget honesty": (
        "## MAMBA budget honesty", "| sampler | T s |", [(("bench_mamba_budget", None),)] * 6,
        {f"{label} | {t:g}": at((sampler, t), BUDGET_CELLS)
         for label, sampler in (("SGLD", "SGLD"), ("SGHMC (L = 5)", "SGHMC"),
                                ("SGNHT", "SGNHT"))
         for t in (10.0, 20.0)},
        2,
    ),
    "MNIST BNN, where the time went": (
        "### Where the time went", "| piece of an SGLD step",
        [(("bench_mnist_bnn_profile", None),)],
        {"the noise, TensorFlow's stateless Philox normals (what the kernels drew before)":
             mnist_part("profile", "cpu_ms_per_step_median", "noise_philox"),
         "the noise, the kernels' Threefry normals now":
             mnist_part("profile", "cpu_ms_per_step_median", "noise_threefry"),
         "the minibatch gather (600 × 784 rows) and the gradient":
             mnist_part("profile", "cpu_ms_per_step_median", "minibatch_gradient")},
    ),
    **{
        f"MNIST BNN, {name}": (
            f"`benchmarks/results/{name}.json`", "| | steps/s | ours / SGMCMCJax",
            [((name, None),)] * 3,
            {"ours, plain TF (`random_window`)": [
                 mnist("plain_tf:random_window"),
                 mnist("plain_tf:random_window", over="sgmcmcjax"),
                 mnist("plain_tf:random_window", over="blackjax")],
             "ours, Keras 3 (`KerasPosterior`)": [
                 mnist("keras:random_window"),
                 mnist("keras:random_window", over="sgmcmcjax"),
                 mnist("keras:random_window", over="blackjax")],
             "SGMCMCJax 0.2.13": [mnist("sgmcmcjax"), _no_figure, _no_figure],
             "BlackJAX 1.7.1": [mnist("blackjax"), _no_figure, _no_figure]},
        )
        for name in ("bench_mnist_bnn_vs_peers_idle", "bench_mnist_bnn_vs_peers_idle_epyc")
    },
    "MNIST BNN, where the noise is drawn": (
        "`benchmarks/results/bench_mnist_bnn_noise_order.json`", "| loop | wall ms",
        [(("bench_mnist_bnn_noise_order", None),)] * 2,
        {label: [mnist_part("noise_order", "wall_ms_per_step_median", part),
                 mnist_part("noise_order", "cpu_ms_per_step_median", part)]
         for label, part in (
             ("no noise (`θ + ε/2 ∇` only)", "no_noise"),
             ("noise drawn in the update that follows the previous backward pass (the kernels' "
              "order)", "noise_after_gradient"),
             ("the same noise drawn at the top of the step, before the forward pass, used after "
              "the backward pass", "noise_before_gradient"))},
    ),
    "MNIST BNN, noise drawn ahead": (
        "**With `prefetch_noise=True`, idle", "| | run 1 | run 2 |",
        [(("bench_mnist_bnn_vs_peers_idle_epyc_prefetch", None),),
         (("bench_mnist_bnn_vs_peers_idle_epyc_prefetch_2", None),)]
        + [(("bench_mnist_bnn_vs_peers_idle_epyc_prefetch", None),
            ("bench_mnist_bnn_vs_peers_idle_epyc_prefetch_2", None))] * 2,
        {label: [mnist(config), mnist(config), mnist(config, over="sgmcmcjax"),
                 mnist(config, over="blackjax")]
         for label, config in (
             ("ours, plain TF, `prefetch_noise=True`", "plain_tf:random_window:prefetch"),
             ("ours, Keras 3, `prefetch_noise=True`", "keras:random_window:prefetch"),
             ("ours, plain TF, default", "plain_tf:random_window"),
             ("ours, Keras 3, default", "keras:random_window"))}
        | {"SGMCMCJax 0.2.13": [mnist("sgmcmcjax")] * 2 + [_no_figure] * 2,
           "BlackJAX 1.7.1": [mnist("blackjax")] * 2 + [_no_figure] * 2},
    ),
    "MNIST BNN, ours against the peers, one run": (
        "### Ours against the peers, one run", "| | before (Philox noise)",
        [((name, None),) for name in ("bench_mnist_bnn_before_noise_fix",
                                      "bench_mnist_bnn_vs_peers_loaded",
                                      "bench_mnist_bnn_vs_peers_loaded_2")],
        {"when (2026-11-23, UTC), order": "clock times, from the runs' logs",
         "load average": "the load over each run, read off its log by hand",
         "ours, plain TF (`random_window`)": mnist("plain_tf:random_window"),
         "ours, Keras 3 (`KerasPosterior`)": mnist("keras:random_window"),
         "SGMCMCJax 0.2.13 (jax 0.7.2)": mnist("sgmcmcjax"),
         "BlackJAX 1.7.1 (jax 0.10.2)": mnist("blackjax"),
         "plain TF / SGMCMCJax": mnist("plain_tf:random_window", over="sgmcmcjax"),
         "plain TF / BlackJAX": mnist("plain_tf:random_window", over="blackjax"),
         "Keras / SGMCMCJax, / BlackJAX": joined(mnist("keras:random_window", over="sgmcmcjax"),
                                                 mnist("keras:random_window", over="blackjax")),
         "CPU-seconds per 1,000 steps: ours plain TF, Keras": joined(
             mnist_cpu("plain_tf:random_window"), mnist_cpu("keras:random_window")),
         "the same, SGMCMCJax, BlackJAX (estimated)":
             "estimated from the peers' foreign CPU time, as the text below says"},
    ),
    "mask draws": (
        "## Mask draws: hand-written vs TFP distributions", "| law | hand-written under XLA",
        [(("bench_masks", None),)] * 5,
        {label: [mask(law, c, why) for c in ("hand", "tfp", "same", "ratio", "hlo")]
         for label, law, why in (("Bernoulli(0.3)", "bernoulli_0.3", False),
                                 ("U[0, 1]", "uniform", False),
                                 ("Beta(2, 5)", "beta_2_5", True),
                                 ("Beta(½, ½)", "beta_0.5_0.5", False))},
    ),
    "epoch permutation": (
        "## Epoch permutation: Feistel vs `index_shuffle`", "| | Feistel | `index_shuffle` |",
        [(("bench_permutation", None),)] * 2,
        {"compiles under XLA (CPU)": None,
         "bijection of `[0, 10^6)`, seeds differ": None,
         "χ² p-value of the first 1% batch over 50 seeds, 100 bins": [
             permutation("feistel/uniformity_chi2_p", 3),
             permutation("index_shuffle/uniformity_chi2_p", 2)],
         "1% batch (10⁴), XLA": [
             permutation("feistel/seconds_per_batch_0.01_xla", 2, 1e3, " ms"), _no_figure],
         "0.1% batch (10³), XLA": [
             permutation("feistel/seconds_per_batch_0.001_xla", 3, 1e3, " ms"), _no_figure],
         "1% batch, plain graph": [
             permutation("feistel/seconds_per_batch_0.01_graph", 1, 1e3, " ms"),
             permutation("index_shuffle/seconds_per_batch_0.01_graph", 2, 1e3, " ms")],
         "0.1% batch, plain graph": [
             permutation("feistel/seconds_per_batch_0.001_graph", 2, 1e3, " ms"),
             permutation("index_shuffle/seconds_per_batch_0.001_graph", 2, 1e3, " ms")]},
    ),
}  # fmt: skip


def json_table_problems(text: str, table: str) -> list[str]:
    """Every cell of ``JSON_TABLES[table]`` in ``text`` that its result files do not print
    as (in either of :data:`ROUNDINGS`): page and file side by side. Bold and the slow-state
    mark ``*`` are not figures."""
    anchor, header, columns, rows, *label_cells = JSON_TABLES[table]
    first = label_cells[0] if label_cells else 1
    docs = {name: _json(f"benchmarks/results/{name}.json") for col in columns for name, _ in col}
    body = table_after(text[text.index(anchor) :], header)
    problems = [] if body else [f"{table}: no rows"]
    for line in body:
        label = " | ".join(line[:first]).replace("*", "")
        cells = [c.replace("*", "").replace("—", "–") or "–" for c in line[first:]]
        cells += ["–"] * (len(columns) - len(cells))  # empty cells at the end of the row
        if label not in rows:
            problems.append(f"{table}: row {label!r} has no source")
            continue
        spec = rows[label]
        if isinstance(spec, str):  # figures the file does not hold: the reason
            continue
        if spec is None:  # a row of words: it may not carry a figure
            if any(_FIGURE.search(c) for c in cells):
                problems.append(f"{table}, {label}: a figure in a row without a source")
            continue
        fns = spec if isinstance(spec, list) else [spec] * len(columns)
        if len(cells) != len(columns):
            problems.append(f"{table}, {label}: {len(cells)} cells, {len(columns)} columns")
            continue
        for k, (page, fn, col) in enumerate(zip(cells, fns, columns)):
            wants = []
            for fmt in ROUNDINGS:
                parts = [fn(docs[name], key, fmt) for name, key in col]
                none = all(p is None for p in parts)
                wants.append("–" if none else " / ".join(p or "–" for p in parts))
            if page not in wants:
                problems.append(
                    f"{table}, {label}, column {k + 1}: page {page!r}, JSON {wants[0]!r}"
                )
    return problems


@pytest.mark.parametrize("table", list(JSON_TABLES))
def test_json_table_matches_its_result_files(table):
    problems = json_table_problems(BENCHMARKS_MD.read_text(encoding="utf-8"), table)
    assert not problems, "\n".join(problems)


def plant_in_table(text: str, table: str) -> tuple[str, str]:
    """``text`` with the last digit of the first figure of ``JSON_TABLES[table]``'s first row
    with figures changed by five (more than the two roundings of a tie differ), and that
    row's label."""
    anchor, header, _, rows, *label_cells = JSON_TABLES[table]
    first = 1 + (label_cells[0] if label_cells else 1)  # the first cell after the label
    start = text.index(anchor)
    lines = text[start:].splitlines(keepends=True)
    row = next(k for k, ln in enumerate(lines) if ln.startswith(header)) + 2
    while not isinstance(rows.get(" | ".join(c.strip() for c in lines[row].split("|")[1:first])),
                         (list, Callable)):  # fmt: skip
        row += 1  # a row of words, or of figures the file does not hold
    cells = lines[row].split("|")
    j = next(j for j in range(first, len(cells)) if re.search(r"\d", cells[j]))
    cells[j] = re.sub(r"(\d)(?![\d,.])", lambda m: str((int(m[1]) + 5) % 10), cells[j], count=1)
    lines[row] = "|".join(cells)
    return text[:start] + "".join(lines), " | ".join(c.strip() for c in cells[1:first])


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


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: sample_posterior before and after (bench_before_after_sample_posterior.json)

BEFORE_AFTER_HEADER = "| posterior | before (s, median) | after (s, median) |"


def _cell_problems(
    rows: list[list[str]], runs: dict[str, dict], want: Callable[[dict], list[str]],
    name: Callable[[str], str],
) -> list[str]:
    """Each cell of ``rows`` that ``want(run)`` does not print, ``run`` being the JSON run
    its row's first cell names (rows naming none are left to the caller's row check)."""
    problems = []
    for row in rows:
        r = runs.get(row[0])
        if r is None:
            continue
        for column, (page, json_cell) in enumerate(zip(row[1:], want(r)), 1):
            if page != json_cell:
                problems.append(
                    f"{name(row[0])}, column {column}: page {page!r}, JSON {json_cell!r}")
    return problems


def _posterior_table_problems(text: str, path: str, header: str, want: Any) -> list[str]:
    """Every cell of a ``bench_before_after`` table (one row per posterior, under
    ``header``) that its JSON at ``path`` does not print, ``want(result)`` giving a row's
    cells after the posterior's name."""
    runs = {r["posterior"]: r for r in _json(path)["results"]}
    rows = table_after(text, header)
    problems = []
    if sorted(row[0] for row in rows) != sorted(runs):
        problems.append(f"rows {[row[0] for row in rows]} against {sorted(runs)}")
    return problems + _cell_problems(rows, runs, want, lambda key: key)


def _errors_and_verdicts(b: dict, a: dict) -> list[str]:
    """A before/after row's last two cells: the worst mean errors and the verdicts."""
    statuses = b["verdict"] + a["verdict"]
    return [
        f"{half_up(max(b['max_mean_error']), 3)} / {half_up(max(a['max_mean_error']), 3)}",
        f"{statuses[0]} × {len(statuses)}" if len(set(statuses)) == 1 else "mixed",
    ]


def before_after_problems(text: str) -> list[str]:
    """Every cell of the before/after table that its JSON does not print."""

    def want(r: dict) -> list[str]:
        b, a = r["before"], r["after"]
        phase = {
            key: f"{half_up(b['phases'][key], 1)} → {half_up(a['phases'][key], 1)}"
            for key in ("seconds_tuning_sampling", "seconds_map")
        }
        return [
            half_up(b["median_seconds"], 1),
            half_up(a["median_seconds"], 1),
            half_up(r["ratio_after_over_before"], 2),
            phase["seconds_tuning_sampling"],
            phase["seconds_map"],
            *_errors_and_verdicts(b, a),
        ]

    return _posterior_table_problems(
        text, "benchmarks/results/bench_before_after_sample_posterior.json",
        BEFORE_AFTER_HEADER, want,
    )


def test_before_after_table_matches_its_json():
    assert not before_after_problems(BENCHMARKS_MD.read_text(encoding="utf-8"))


def test_a_planted_before_after_figure_is_found():
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    row = next(r for r in text.splitlines() if r.startswith("| earnings-logearn_height | 19.8 |"))
    planted = text.replace(row, row.replace("| 19.8 |", "| 19.9 |", 1), 1)
    assert before_after_problems(planted) == [
        "earnings-logearn_height, column 1: page '19.9', JSON '19.8'"
    ]


# ---------------------------------------------------------------------------------------------
# docs/faults.md: the full fault trial's table and counts (benchmarks/results/fault_trial.json)

FAULTS_MD = ROOT / "docs" / "faults.md"


def faults_table_problems(text: str) -> list[str]:
    """Every row of the trial's table, and its counts, that the trial's JSON does not print
    (the rows as ``benchmarks/fault_trial.py`` writes them, ``|`` escaped)."""
    doc = _json("benchmarks/results/fault_trial.json")
    want = [
        f"| `{r['scenario']}` | {r['fault']} | **{r['outcome']}** | "
        f"{r['detail'].replace('|', chr(92) + '|')} | {r['message'].replace('|', chr(92) + '|')} |"
        for r in doc["scenarios"]
    ]
    start = text.index("| scenario | fault | outcome | what happened | message |")
    page = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("| `"):
            break
        page.append(line)
    problems = [f"row {i}: page {p!r}, JSON {w!r}" for i, (p, w) in enumerate(zip(page, want))
                if p != w]  # fmt: skip
    if len(page) != len(want):
        problems.append(f"{len(page)} rows on the page, {len(want)} in the JSON")
    c = doc["counts"]
    counts = (f"**{c['clear']} clear, {c['ok']} ok, {c['traceback']} tracebacks, "
              f"{c['silent']} silent, {c['unclear']} unclear, {c['skipped']} skipped.**")
    if counts not in " ".join(text.split()):
        problems.append(f"counts {counts!r} not on the page")
    return problems


def test_faults_table_matches_the_trials_json():
    doc = _json("benchmarks/results/fault_trial.json")
    assert doc["counts"]["silent"] == 0 and doc["counts"]["traceback"] == 0
    assert not faults_table_problems(FAULTS_MD.read_text(encoding="utf-8"))


def test_a_planted_faults_row_is_found():
    text = FAULTS_MD.read_text(encoding="utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("| `swapped_chunks_diagnose`"))
    planted = text.replace(row, row.replace("| **clear** |", "| **ok** |"), 1)
    assert planted != text
    problems = faults_table_problems(planted)
    assert len(problems) == 1 and problems[0].startswith("row 0:"), problems
    assert faults_table_problems(text.replace("**36 clear", "**35 clear", 1))


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: the runaway rule over six seeds (bench_verdict_seeds_eight_schools.json)

SEEDS_HEADER = "| seed | verdict before | verdict after |"
#: The sections of seeds before and after a change: their JSON and their table's header.
SEEDS_SECTIONS = {
    "eight_schools": ("benchmarks/results/bench_verdict_seeds_eight_schools.json",
                      SEEDS_HEADER),
    "garch": ("benchmarks/results/bench_verdict_seeds_garch.json",
              "| GARCH seed | verdict before | verdict after |"),
}


def verdict_seeds_problems(text: str, section: str = "eight_schools") -> list[str]:
    """Every cell, reason and count of a seeds section that its JSON does not print."""
    path, header = SEEDS_SECTIONS[section]
    doc = _json(path)
    runs = {str(r["seed"]): r for r in doc["results"]}
    rows = table_after(text, header)
    problems = []
    if [row[0] for row in rows] != list(runs):
        problems.append(f"rows {[row[0] for row in rows]} against seeds {list(runs)}")

    def want(r: dict) -> list[str]:
        b, a = r["before"], r["after"]
        return [b["verdict"], a["verdict"],
                f"{_err(b['max_mean_error'])} / {_err(a['max_mean_error'])}",
                _ratio(a["sd_ratio_min"], a["sd_ratio_max"])]  # fmt: skip

    problems += _cell_problems(rows, runs, want, lambda key: f"seed {key}")
    flat = " ".join(text.split())
    for r in doc["results"]:
        for why in r["before"]["reasons"]:
            if f'seed {r["seed"]}, before: "{why}"' not in flat:
                problems.append(f"seed {r['seed']}: reason {why!r} not quoted")
    s = doc["summary"]
    counts = (f"Before: `ok` at {s['before']['ok']} of {len(runs)} seeds; after: `ok` at "
              f"{s['after']['ok']} of {len(runs)}.")
    if counts not in flat:
        problems.append(f"counts {counts!r} not on the page")
    return problems


@pytest.mark.parametrize("section", sorted(SEEDS_SECTIONS))
def test_verdict_seeds_table_matches_its_json(section):
    doc = _json(SEEDS_SECTIONS[section][0])
    assert doc["summary"]["after"]["ok_but_wrong"] == 0
    assert not verdict_seeds_problems(BENCHMARKS_MD.read_text(encoding="utf-8"), section)


def test_a_planted_verdict_seeds_cell_is_found():
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    row = next(r for r in text.splitlines() if r.startswith("| 2 | failed | ok |"))
    planted = text.replace(row, row.replace("| failed | ok |", "| ok | ok |"), 1)
    assert verdict_seeds_problems(planted) == [
        "seed 2, column 1: page 'ok', JSON 'failed'"
    ]


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md: BayesianModel.fit before and after (bench_keras_fit_before_after_*.json)

KERAS_BEFORE_AFTER_HEADER = "| model | time to first posterior (s), before → after |"
KERAS_BEFORE_AFTER_JSON = {
    "784-100-10 MLP": "benchmarks/results/bench_keras_fit_before_after_mlp.json",
    "keras.io convnet": "benchmarks/results/bench_keras_fit_before_after_convnet.json",
}


def keras_before_after_problems(text: str) -> list[str]:
    """Every cell of the ``BayesianModel.fit`` before/after table its JSON does not print."""
    rows = table_after(text, KERAS_BEFORE_AFTER_HEADER)
    problems = []
    if sorted(row[0] for row in rows) != sorted(KERAS_BEFORE_AFTER_JSON):
        problems.append(f"rows {[row[0] for row in rows]}")
    runs = {}
    for label, path in KERAS_BEFORE_AFTER_JSON.items():
        doc = _json(path)
        (model, result), = doc["models"].items()
        runs[label] = (doc["arguments"], result)

    def want(run: tuple) -> list[str]:
        args, result = run
        b, a = (result["medians"][args[k]] for k in ("before_label", "after_label"))
        ratio = result["ratios_after_over_before"]

        def pair(key: str, decimals: int) -> str:
            return f"{half_up(b[key], decimals)} → {half_up(a[key], decimals)}"

        return [
            pair("time_to_first_posterior", 1),
            half_up(ratio["time_to_first_posterior"], 2),
            pair("sampling_steps_per_second", 0),
            half_up(ratio["sampling_steps_per_second"], 2),
            pair("cpu_ms_per_sampling_step", 2),
            pair("accuracy", 3),
            pair("nll", 3),
            pair("ece", 3),
        ]

    return problems + _cell_problems(rows, runs, want, lambda key: key)


def test_keras_before_after_table_matches_its_json():
    assert not keras_before_after_problems(BENCHMARKS_MD.read_text(encoding="utf-8"))


def test_a_planted_keras_before_after_figure_is_found():
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    row = next(r for r in text.splitlines() if r.startswith("| 784-100-10 MLP |"))
    cells = row.split("|")
    cells[3] = " 9.99 "  # the ratio of the times
    planted = text.replace(row, "|".join(cells), 1)
    assert keras_before_after_problems(planted) == [
        f"784-100-10 MLP, column 2: page '9.99', JSON {row.split('|')[3].strip()!r}"
    ]


ONE_CORE_HEADER = "| posterior | before → after (s, median of 3) |"


def one_core_problems(text: str) -> list[str]:
    """Every cell of the posteriordb before/after table (``bench_before_after_one_core.json``)
    that its JSON does not print."""

    def want(r: dict) -> list[str]:
        b, a = r["before"], r["after"]
        return [
            f"{half_up(b['median_seconds'], 1)} → {half_up(a['median_seconds'], 1)}",
            half_up(r["ratio_after_over_before"], 2),
            *_errors_and_verdicts(b, a),
        ]

    return _posterior_table_problems(
        text, "benchmarks/results/bench_before_after_one_core.json", ONE_CORE_HEADER, want
    )


def test_one_core_table_matches_its_json():
    assert not one_core_problems(BENCHMARKS_MD.read_text(encoding="utf-8"))


def test_a_planted_one_core_figure_is_found():
    text = BENCHMARKS_MD.read_text(encoding="utf-8")
    row = next(r for r in text.splitlines() if r.startswith("| arK-arK |"))
    cells = row.split("|")
    cells[3] = " 9.99 "
    assert one_core_problems(text.replace(row, "|".join(cells), 1)) == [
        f"arK-arK, column 2: page '9.99', JSON {row.split('|')[3].strip()!r}"
    ]


