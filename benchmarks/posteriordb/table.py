"""The posteriordb table: ``sg.sample_posterior`` beside TFP's NUTS on every posterior.

One row per posterior of `models.NAMES`: its family, ``N``, the number of unconstrained
parameters, ``sample_posterior``'s verdict and reasons, its accuracy against posteriordb's
reference draws (the worst ``|mean - ref mean| / ref sd``, the range of ``sd / ref sd``,
accurate when the first is at most 0.2 and the range lies in [0.8, 1.25]), its seconds and
where they went (the phases of ``SamplePosteriorResult.timings``; each phase includes its
own tracing and XLA compilation), and TFP's ``windowed_adaptive_nuts`` (4 chains, 1,000
warm-up and 1,000 kept draws, float64, XLA) in the same process: its seconds (tracing and
compilation included) and the same accuracy figures.

Each posterior runs in a child process of its own (``--child``), ``sample_posterior``
first, then NUTS, each with a time limit (``--sp-timeout``, ``--nuts-timeout``): a sampler
that does not finish in time is recorded as timed out, and the next posterior starts. Rows
are written to ``--json`` as each finishes; a rerun skips the posteriors already there
(``--redo`` reruns them), so a long run can be stopped and continued. ``--markdown`` writes
the table, ``--docs`` the documentation page (the table with its command, machine, load and
counts). Run from the repository root:

```bash
python -m benchmarks.posteriordb.table --json benchmarks/results/posteriordb_table.json \\
    --docs docs/posteriordb.md
python -m benchmarks.posteriordb.table --only nes2000-nes sblrc-blr --json out.json
python -m benchmarks.posteriordb.table --skip diamonds-diamonds --json out.json
python -m benchmarks.posteriordb.table --render --json benchmarks/results/posteriordb_table.json \\
    --docs docs/posteriordb.md   # the page again from the JSON, no sampling
```
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

try:
    from benchmarks._load import load as _load_module
except ImportError:  # run by path: the repository root is not on sys.path
    _spec = importlib.util.spec_from_file_location(
        "_benchmarks__load", Path(__file__).resolve().parents[1] / "_load.py"
    )
    _loader = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_loader)
    _load_module = _loader.load

__all__ = [
    "FAMILIES",
    "MEAN_TOLERANCE",
    "SD_MEASURABLE",
    "SD_RATIO_RANGE",
    "accuracy",
    "counts",
    "family",
    "main",
    "markdown_table",
    "page",
    "sd_error",
]

ROOT = Path(__file__).resolve().parents[2]

#: The accuracy a row must reach to count as accurate (the goal's tolerances).
MEAN_TOLERANCE = 0.2
SD_RATIO_RANGE = (0.8, 1.25)
#: The relative Monte Carlo error of an sd ratio (`sd_error`) above which the sd is judged
#: by quantiles: beyond it the band `SD_RATIO_RANGE` is under ±2.3 standard errors wide,
#: so a right sampler falls outside it often. Every posteriordb parameter but two lies
#: under 0.03; ``one_comp_mm_elim_abs``'s ``K_m`` and ``V_m`` (sds set by a heavy tail)
#: at 0.21 and 0.20 (at 4,000 draws).
SD_MEASURABLE = 0.1

#: posteriordb name prefix -> family (the regressions are the rest).
FAMILIES: dict[str, str] = {
    "eight_schools": "hierarchical",
    "gp_pois_regr-gp_regr": "Gaussian process",
    "gp_pois_regr-gp_pois_regr": "Gaussian process (Poisson)",
    "arK": "time series (AR)",
    "arma": "time series (ARMA)",
    "garch": "time series (GARCH)",
    "low_dim_gauss_mix": "mixture",
    "hmm_example": "hidden Markov",
    "bball_drive_event": "hidden Markov",
    "one_comp_mm_elim_abs": "ODE",
    "hudson_lynx_hare": "ODE",
}

#: The columns of the table: header, row -> cell.
PHASES = ("map", "curvature", "other_modes", "tuning_sampling", "tuning_metric",
          "adaptation", "sampling", "verdict")


def family(name: str) -> str:
    """The family of posterior ``name`` (``"regression"`` unless listed in `FAMILIES`)."""
    for prefix, fam in FAMILIES.items():
        if name.startswith(prefix):
            return fam
    return "regression"


def _quantile_figures(x: np.ndarray, ref: Any) -> dict[str, float]:
    """``x``'s median error in robust reference sds (``IQR / 1.349``) and the ratios of
    its interquartile range and 5-95% range to the reference's."""
    q05, q25, q50, q75, q95 = np.quantile(x, (0.05, 0.25, 0.5, 0.75, 0.95))
    r05, r25, r50, r75, r95 = ref.quantiles
    return {
        "median_z": float(abs(q50 - r50) / ((r75 - r25) / 1.349)),
        "iqr_ratio": float((q75 - q25) / (r75 - r25)),
        "range90_ratio": float((q95 - q05) / (r95 - r05)),
    }


def sd_error(ref: Any, num_draws: int) -> float:
    """The relative Monte Carlo error of ``sd / ref.sd`` for ``num_draws`` draws, from the
    spread of the reference's own chains' sds (``ref.chain_sd_cv``, 1,000 draws each):
    ``cv · √(1000 / num_draws + 1000 / 10000)``."""
    return float(ref.chain_sd_cv * np.sqrt(1000.0 / num_draws + 1000.0 / 10000.0))


def accuracy(flat: dict[str, np.ndarray], reference: dict[str, Any]) -> dict[str, Any]:
    """The worst standardised mean error and the range of sd ratios of ``flat`` (Stan
    scalar name -> draws) against ``reference`` (name -> `common.Reference`).

    A parameter whose sd the draws cannot measure (`sd_error` above `SD_MEASURABLE`: the
    sd is set by rare draws in a heavy tail, and the reference's own 1,000-draw chains
    disagree on it by far more than the tolerance) is judged by its quantiles instead
    (``"quantile_judged"``): its median within `MEAN_TOLERANCE` robust sds of the
    reference's, its interquartile and 5-95% ranges within `SD_RATIO_RANGE` of the
    reference's. Every other parameter is judged by its mean and sd.
    """
    errs, ratios, by_quantiles = {}, {}, {}
    for name, ref in reference.items():
        if name not in flat:
            continue  # a generated quantity, not a parameter
        x = np.asarray(flat[name], np.float64).ravel()
        if getattr(ref, "quantiles", ()) and sd_error(ref, x.size) > SD_MEASURABLE:
            by_quantiles[name] = {
                "sd_ratio": float(x.std() / ref.sd),
                "sd_error": sd_error(ref, x.size),
                **_quantile_figures(x, ref),
            }
            continue
        errs[name] = abs(x.mean() - ref.mean) / ref.sd
        ratios[name] = x.std() / ref.sd
    worst = max(errs, key=errs.__getitem__)
    lo, hi = min(ratios, key=ratios.__getitem__), max(ratios, key=ratios.__getitem__)
    figures = list(errs.values()) + list(ratios.values())
    figures += [v for q in by_quantiles.values() for v in q.values()]
    quantiles_ok = all(
        q["median_z"] <= MEAN_TOLERANCE
        and SD_RATIO_RANGE[0] <= q["iqr_ratio"] <= SD_RATIO_RANGE[1]
        and SD_RATIO_RANGE[0] <= q["range90_ratio"] <= SD_RATIO_RANGE[1]
        for q in by_quantiles.values()
    )
    out = {
        "max_abs_z": float(errs[worst]),
        "max_abs_z_at": worst,
        "sd_ratio_min": float(ratios[lo]),
        "sd_ratio_min_at": lo,
        "sd_ratio_max": float(ratios[hi]),
        "sd_ratio_max_at": hi,
        "accurate": bool(
            np.all(np.isfinite(figures))
            and errs[worst] <= MEAN_TOLERANCE
            and SD_RATIO_RANGE[0] <= ratios[lo]
            and ratios[hi] <= SD_RATIO_RANGE[1]
            and quantiles_ok
        ),
    }
    if by_quantiles:
        out["quantile_judged"] = by_quantiles
    return out


# -- the child: one posterior -------------------------------------------------------- #
def _write(path: Path, row: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(row, indent=1, default=float))
    os.replace(tmp, path)


def child(name: str, seed: int, out: Path, nuts: bool, nuts_only: bool = False) -> None:
    """Run ``sample_posterior`` then NUTS on ``name``, writing the row to ``out`` after each
    (``nuts_only``: NUTS alone, the row holding only its figures)."""
    import tfp_sgmcmc as sg

    models = _load_module("posteriordb.models")
    model = models.load(name, dtype=np.float64)
    row: dict[str, Any] = {
        "posterior": name,
        "family": family(name),
        "N": int(model.num_examples),
        "load_average_start": os.getloadavg()[0],
    }
    if nuts_only:
        _nuts(model, seed, row)
        _write(out, row)
        return
    t0 = time.perf_counter()
    try:
        # As a user would write it; a series posterior has one example (N = 1).
        post = sg.JointPosterior(model.prior, model.likelihood_fn, model.data,
                                 batch_size=min(32, model.num_examples))
        res = sg.sample_posterior(post, num_results=1000, num_chains=4, seed=seed,
                                  progress=False)
    except Exception as e:  # noqa: BLE001 -- the table records what a user would see
        row.update(verdict="error", reasons=[f"{type(e).__name__}: {e}"],
                   seconds=time.perf_counter() - t0, accurate=False)
    else:
        row.update(
            seconds=time.perf_counter() - t0,
            d=int(res.whitened.shape[-1]),
            verdict=res.verdict,
            reasons=list(res.reasons),
            step_size=float(res.step_size),
            batch_size=int(res.batch_size),
            notes=list(res.notes),
            timings={k: float(v) for k, v in res.timings.items()},
            **accuracy(model.flatten(res.draws), model.reference),
        )
    row["sp_done"] = True
    _write(out, row)
    if nuts:
        _nuts(model, seed, row)
        _write(out, row)


def _nuts(model: Any, seed: int, row: dict[str, Any]) -> None:
    """``windowed_adaptive_nuts`` on ``model``: its figures into ``row["nuts"]``."""
    check_nuts = _load_module("posteriordb.check_nuts")
    t0 = time.perf_counter()
    try:
        draws, trace = check_nuts.run_windowed(model, 1000, 4, 1000, seed, True)
    except Exception as e:  # noqa: BLE001
        row["nuts"] = {"status": f"error: {type(e).__name__}: {e}",
                       "seconds": time.perf_counter() - t0}
    else:
        seconds = time.perf_counter() - t0
        summary = check_nuts.summarise(model, draws)
        row["nuts"] = {
            "status": "done",
            "seconds": seconds,
            "min_ess": summary["min_ess"],
            "max_rhat": summary["max_rhat"],
            "divergences": int(np.sum(trace["diverging"])),
            "mean_leapfrogs": float(np.mean(trace["n_steps"])),
            "xla": bool(trace.get("xla", True)),
            **accuracy(model.flatten(draws), model.reference),
        }
    row["load_average_end"] = os.getloadavg()[0]


# -- the parent: every posterior --------------------------------------------------- #
def _run_child(
    name: str, args: argparse.Namespace, work: Path, previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One posterior's row from a child process, within the time limits; with a
    ``previous`` row that lacks NUTS, NUTS alone, added to it."""
    out = work / f"{name}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "benchmarks.posteriordb.table", "--child", name,
           "--seed", str(args.seed), "--child-out", str(out)]
    if args.no_nuts:
        cmd.append("--no-nuts")
    if previous is not None:
        cmd.append("--nuts-only")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    log = open(work / f"{name}.log", "w")  # noqa: SIM115 -- closed below
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    start = time.perf_counter()
    sp_end = None
    stopped = None
    while proc.poll() is None:
        time.sleep(1.0)
        now = time.perf_counter()
        if sp_end is None and (out.exists() or previous is not None):
            sp_end = now
        if sp_end is None and now - start > args.sp_timeout:
            stopped = "sample_posterior"
        elif sp_end is not None and now - sp_end > args.nuts_timeout:
            stopped = "nuts"
        if stopped:
            proc.kill()
            proc.wait()
            break
    log.close()
    if previous is not None:
        row = dict(previous)
        if out.exists():
            row["nuts"] = json.loads(out.read_text())["nuts"]
            row["nuts"]["separate_process"] = True
    elif out.exists():
        row = json.loads(out.read_text())
    else:
        row = {"posterior": name, "family": family(name), "verdict": "error",
               "accurate": False, "seconds": time.perf_counter() - start}
        if stopped == "sample_posterior":
            row.update(verdict="timed out", seconds=float(args.sp_timeout),
                       reasons=[f"did not finish in {args.sp_timeout:.0f} s"])
        else:
            tail = (work / f"{name}.log").read_text()[-2000:]
            row["reasons"] = [f"child process exited with {proc.returncode}: {tail}"]
    if not args.no_nuts and "nuts" not in row:
        if stopped == "nuts":
            row["nuts"] = {"status": "timed out", "seconds": float(args.nuts_timeout)}
        elif stopped != "sample_posterior":
            row["nuts"] = {"status": f"child process exited with {proc.returncode}"}
    row.pop("sp_done", None)
    return row


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "tfp_sgmcmc"],
                               cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (tfp_sgmcmc/ modified)" if dirty else "")


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version()}


# -- the table and the page ---------------------------------------------------------- #
def _fmt_range(lo: float | None, hi: float | None) -> str:
    return "" if lo is None else f"{lo:.2f}–{hi:.2f}"


def _nuts_seconds(row: dict[str, Any]) -> float | None:
    nuts = row.get("nuts") or {}
    if nuts.get("status") == "done":
        return float(nuts["seconds"])
    return None


def faster_than_nuts(row: dict[str, Any]) -> bool | None:
    """Whether ``sample_posterior`` took less time than NUTS (``None``: no NUTS figure).

    NUTS that ran out of its time limit counts as slower when ``sample_posterior``
    finished within that limit."""
    nuts = row.get("nuts") or {}
    if nuts.get("status") == "done":
        return float(row["seconds"]) < float(nuts["seconds"])
    if nuts.get("status") == "timed out":
        return float(row["seconds"]) < float(nuts["seconds"])
    return None


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """The table's totals: accurate and ``ok``; flagged (``suspect``, ``failed``, an error
    or a time-out); ``ok`` but wrong; faster than NUTS; NUTS accurate."""
    ok = [r for r in rows if r.get("verdict") == "ok"]
    return {
        "posteriors": len(rows),
        "accurate_and_ok": sum(bool(r.get("accurate")) for r in ok),
        "flagged": len(rows) - len(ok),
        "flagged_but_accurate": sum(bool(r.get("accurate")) for r in rows
                                    if r.get("verdict") != "ok"),
        "wrong_and_ok": sum(not r.get("accurate") for r in ok),
        "faster_than_nuts": sum(bool(faster_than_nuts(r)) for r in rows),
        "nuts_compared": sum(faster_than_nuts(r) is not None for r in rows),
        "nuts_accurate": sum(bool((r.get("nuts") or {}).get("accurate")) for r in rows),
    }


def _reasons(row: dict[str, Any]) -> str:
    text = "; ".join(row.get("reasons") or [])
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= 160 else text[:157] + "..."


def _phases(row: dict[str, Any]) -> str:
    t = row.get("timings") or {}
    short = {"map": "mode", "curvature": "curv", "other_modes": "modes",
             "tuning_sampling": "tune", "tuning_metric": "metric", "adaptation": "adapt",
             "sampling": "sample", "verdict": "verdict"}
    return ", ".join(f"{short[k]} {t[k]:.0f}" for k in PHASES if t.get(k, 0) >= 0.5)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """One Markdown row per posterior (see the module docstring for the columns)."""
    head = (
        "| posterior | family | N | d | verdict | max \\|z\\| | sd ratio | accurate | s "
        "| where (s) | NUTS s | NUTS max \\|z\\| | NUTS sd ratio | NUTS accurate |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        nuts = r.get("nuts") or {}
        if nuts.get("status") == "done":
            mark = " †" if nuts.get("separate_process") else ""
            mark += " (no XLA)" if nuts.get("xla") is False else ""
            nuts_cells = (f"{nuts['seconds']:.0f}{mark} | {nuts['max_abs_z']:.2f} | "
                          f"{_fmt_range(nuts['sd_ratio_min'], nuts['sd_ratio_max'])} | "
                          f"{'yes' if nuts['accurate'] else 'no'}")
        elif nuts:
            status = nuts["status"]
            label = f"> {nuts['seconds']:.0f} (timed out)" if status == "timed out" else status
            nuts_cells = f"{label} | | | "
        else:
            nuts_cells = " | | | "
        verdict = r.get("verdict", "")
        if r.get("reasons"):
            verdict += f": {_reasons(r)}"
        z = f"{r['max_abs_z']:.2f}" if "max_abs_z" in r else ""
        accurate = ("yes" if r.get("accurate") else "no") + (" ‡" if r.get("quantile_judged")
                                                            else "")
        lines.append(
            f"| {r['posterior']} | {r.get('family', '')} | {r.get('N', '')} | "
            f"{r.get('d', '')} | {verdict} | {z} | "
            f"{_fmt_range(r.get('sd_ratio_min'), r.get('sd_ratio_max'))} | "
            f"{accurate} | {r['seconds']:.0f} | {_phases(r)} | "
            f"{nuts_cells} |"
        )
    return "\n".join(lines)


#: The command that reproduces the whole table and its page.
COMMAND = (
    "python -m benchmarks.posteriordb.table "
    "--json benchmarks/results/posteriordb_table.json --docs docs/posteriordb.md"
)

TABLE_BEGIN = "<!-- table: generated by benchmarks/posteriordb/table.py -->"
TABLE_END = "<!-- end of table -->"


def quantile_notes(rows: list[dict[str, Any]]) -> str:
    """The footnote for rows marked ‡: each parameter judged by quantiles, with its
    figures (empty when there is none)."""
    items = []
    for r in rows:
        for who, fig in (("", r), ("NUTS: ", r.get("nuts") or {})):
            for name, q in (fig.get("quantile_judged") or {}).items():
                items.append(
                    f"- `{r['posterior']}`, {who}`{name}`: sd ratio {q['sd_ratio']:.2f} "
                    f"(relative Monte Carlo error {q['sd_error']:.2f}); median error "
                    f"{q['median_z']:.2f} robust sd, interquartile range ratio "
                    f"{q['iqr_ratio']:.2f}, 5–95% range ratio {q['range90_ratio']:.2f}."
                )
    if not items:
        return ""
    return (
        "\n‡ Judged by quantiles: a parameter whose sd the draws cannot measure (the sd is "
        "set by rare draws in a heavy tail: the relative Monte Carlo error of the sd ratio, "
        "from the spread of the reference's own 1,000-draw chains' sds, exceeds "
        f"{SD_MEASURABLE}, so the band [{SD_RATIO_RANGE[0]}, {SD_RATIO_RANGE[1]}] is not a "
        "test) is accurate when its median lies within "
        f"{MEAN_TOLERANCE} robust sds (interquartile range / 1.349) of the reference's and its "
        "interquartile and 5–95% ranges lie within the same band of the reference's:\n\n"
        + "\n".join(items) + "\n"
    )


def page(doc: dict[str, Any]) -> str:
    """The documentation page for the JSON document ``doc`` of a table run."""
    rows = doc["results"]
    c = counts(rows)
    machine = doc["machine"]
    loads = [r[k] for r in rows for k in ("load_average_start", "load_average_end") if k in r]
    load = f"{min(loads):.1f} to {max(loads):.1f}" if loads else "not recorded"
    missing = [n for n in doc.get("names", []) if n not in {r["posterior"] for r in rows}]
    not_run = ""
    if missing:
        not_run = "\nNot run yet: " + ", ".join(f"`{n}`" for n in missing) + ".\n"
    separate = ""
    if any((r.get("nuts") or {}).get("separate_process") for r in rows):
        separate = (
            "\nNUTS seconds marked † come from a second pass (a child process of its own, "
            "right after the `sample_posterior` pass over every posterior) rather than the "
            "same process.\n"
        )
    runs = "\n".join(doc.get("runs", []))
    note = f"\n{doc['note']}\n" if doc.get("note") else ""
    return f"""# posteriordb: every reference posterior, beside NUTS

*Paths under `benchmarks/` and `tests/` on this page are in the source repository (a clone
of it), not in the installed package.*

[`sg.sample_posterior`](sample_posterior.md) with its defaults (4 chains × 1,000 draws,
float64, seed {doc['seed']}) on posteriordb's reference posteriors (Stan programs transcribed
into TFP form in `benchmarks/posteriordb/`, each checked with TFP's NUTS first; see that
folder's README), compared with posteriordb's reference draws (Stan NUTS, 10 × 1,000 draws),
and beside it, in the same process, TFP's `tfp.experimental.mcmc.windowed_adaptive_nuts`
(4 chains, 1,000 warm-up and 1,000 kept draws, float64, XLA).

```bash
{doc['command']}
```

The rows below came from these runs (a run continues the JSON file, skipping the rows it
already holds):

```bash
{runs}
```

Machine: {machine['cpu']}, {machine['cores']} cores, shared with other jobs (load average
{load} while these rows ran), so wall times vary by a factor of 2 to 3 from row to row;
the comparison with NUTS is within each row. Code: commit `{doc['commit']}`.
Time limits: {doc['sp_timeout']:.0f} s for `sample_posterior`, {doc['nuts_timeout']:.0f} s
for NUTS (a NUTS run stopped there is shown as timed out, and counts as slower).

**Counts** ({c['posteriors']} posteriors{f", {len(missing)} not run yet" if missing else ""}):

- accurate and `ok`: **{c['accurate_and_ok']}**;
- flagged (`suspect`, `failed`, an error or a time-out): **{c['flagged']}** (of which
  accurate all the same: {c['flagged_but_accurate']});
- `ok` but wrong: **{c['wrong_and_ok']}**;
- faster than NUTS: **{c['faster_than_nuts']}** of the {c['nuts_compared']} with a NUTS
  figure; NUTS accurate: {c['nuts_accurate']}.

Accurate: every `|mean − reference mean| / reference sd` ≤ {MEAN_TOLERANCE} ("max |z|") and
every `sd / reference sd` in [{SD_RATIO_RANGE[0]}, {SD_RATIO_RANGE[1]}] ("sd ratio"), over
the Stan parameters (and the transformed parameters the reference lists). `d` is the number
of unconstrained parameters. "where" splits `sample_posterior`'s seconds by phase (mode
search, curvature, other modes, tuning runs, metric, adaptation, sampling, verdict; phases
under half a second left out); each phase includes its own tracing and XLA compilation.
NUTS seconds include its tracing and compilation.
{quantile_notes(rows)}{not_run}{separate}{note}
{TABLE_BEGIN}
{markdown_table(rows)}
{TABLE_END}
"""


def _order(rows: dict[str, dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    pos = {n: i for i, n in enumerate(names)}
    return sorted(rows.values(), key=lambda r: pos.get(r["posterior"], len(pos)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path,
                        default=ROOT / "benchmarks" / "results" / "posteriordb_table.json")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--docs", type=Path, help="also write the documentation page here")
    parser.add_argument("--only", nargs="+", help="these posteriors only")
    parser.add_argument("--skip", nargs="+", default=[], help="not these posteriors")
    parser.add_argument("--redo", action="store_true",
                        help="rerun posteriors already in --json")
    parser.add_argument("--render", action="store_true",
                        help="no sampling: write --markdown / --docs from --json")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--note", help="a paragraph about this run, kept in --json and the page")
    parser.add_argument("--no-nuts", action="store_true", help="sample_posterior only")
    parser.add_argument("--sp-timeout", type=float, default=900.0)
    parser.add_argument("--nuts-timeout", type=float, default=900.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--nuts-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.seed, args.child_out, not args.no_nuts, args.nuts_only)
        return

    models = _load_module("posteriordb.models")
    all_names = list(models.NAMES)
    unknown = sorted((set(args.only or []) | set(args.skip)) - set(all_names))
    if unknown:
        parser.error(f"--only/--skip: unknown posteriors {unknown}; one of {all_names}")
    names = [n for n in (args.only or all_names) if n not in set(args.skip)]
    doc: dict[str, Any] = {}
    if args.json.exists():
        doc = json.loads(args.json.read_text())
    rows = {r["posterior"]: r for r in doc.get("results", [])}
    if not args.render:
        doc.update(
            benchmark="posteriordb_table",
            command=COMMAND,
            runs=doc.get("runs", []) + [
                "python -m benchmarks.posteriordb.table "
                + " ".join(argv if argv is not None else sys.argv[1:])
            ],
            seed=args.seed,
            sp_timeout=args.sp_timeout,
            nuts_timeout=args.nuts_timeout,
            commit=_commit(),
            machine=_machine(),
            names=all_names,
        )
        # The children's logs and rows in progress.
        work = Path(tempfile.gettempdir()) / f"{args.json.stem}_work"
        work.mkdir(parents=True, exist_ok=True)
        for name in names:
            previous = None
            if name in rows and not args.redo:
                # Done, unless NUTS is wanted and missing (a row of a --no-nuts run).
                if args.no_nuts or "nuts" in rows[name] or rows[name].get("d") is None:
                    continue
                previous = rows[name]
            print(f"{name} ...", file=sys.stderr, flush=True)
            row = _run_child(name, args, work, previous)
            row.setdefault("commit", doc["commit"])
            row.setdefault("N", int(models.load(name).num_examples))  # a timed-out row
            rows[name] = row
            doc["results"] = _order(rows, all_names)
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(doc, indent=1) + "\n")
            print(markdown_table([row]).splitlines()[-1], file=sys.stderr, flush=True)
    for name, row in rows.items():
        if "N" not in row and name in all_names:  # rows of a time-out before N was kept
            row["N"] = int(models.load(name).num_examples)
    doc["results"] = _order(rows, doc.get("names", all_names))
    if args.note is not None:
        doc["note"] = args.note
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown_table(doc["results"]) + "\n")
    if args.docs:
        args.docs.write_text(page(doc))
    print(json.dumps(counts(doc["results"])), file=sys.stderr)


if __name__ == "__main__":
    main()
