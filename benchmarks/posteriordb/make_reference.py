"""Summarise posteriordb's reference draws into the ``reference.json`` files of this folder.

posteriordb's reference posteriors are 10 chains x 1,000 Stan NUTS draws
(``reference_draws.json.zip``: a JSON list of 10 dicts, parameter name -> draws). They
are too large to keep here, so each posterior folder keeps their summary instead: for every
parameter (Stan's scalar names, ``beta[1]``, ``sigma``, ...) the mean, the sd and the Monte
Carlo standard error of the mean, ``mcse = sd / sqrt(ess)``, the 5%, 25%, 50%, 75% and 95%
``quantiles`` of all draws and ``chain_sd_cv``, the coefficient of variation of the chains'
own sds (how well 1,000 draws pin the sd down: large where the sd is set by rare draws in a
heavy tail). The ESS is
``tfp.mcmc.effective_sample_size`` over the 10 chains together (``cross_chain_dims=1``, the
cross-chain estimate of Gelman et al.'s BDA3, truncated by Geyer's initial positive sequence,
``filter_beyond_positive_pairs=True``).

Where the reference draws list a transformed parameter instead of a parameter of the Stan
program (the non-centred eight schools' ``theta`` but not ``theta_trans``), the parameter is
computed from each draw (``families.REFERENCE_PARAMETERS``) and summarised with the others.

Usage (``SOURCE`` is a posteriordb checkout's folder holding one folder per posterior, each
with its ``reference_draws.json.zip``; ``--posteriors`` picks some, default all)::

    python benchmarks/posteriordb/make_reference.py SOURCE
    python benchmarks/posteriordb/make_reference.py SOURCE --posteriors sblri-blr nes1972-nes

Without ``--posteriors`` every posterior of this folder (each subfolder with a
``model.stan``) is summarised.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import zipfile
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

HERE = Path(__file__).resolve().parent


def posteriors_here() -> list[str]:
    """The posteriors of this folder: every subfolder holding a ``model.stan``, sorted."""
    return sorted(p.parent.name for p in HERE.glob("*/model.stan"))


def families() -> object:
    """``families.py`` (imported on use: it imports TensorFlow)."""
    return _load_module("posteriordb.families")


def read_zipped_json(path: Path) -> object:
    """The one JSON document inside the zip archive ``path``."""
    with zipfile.ZipFile(path) as archive:
        (member,) = archive.namelist()
        return json.loads(archive.read(member))


def as_arrays(chain: dict[str, list[float]]) -> dict[str, np.ndarray]:
    """One chain's draws as float64 arrays."""
    return {k: np.asarray(v, np.float64) for k, v in chain.items()}


#: The quantile levels kept in ``reference.json``.
QUANTILE_LEVELS = (0.05, 0.25, 0.5, 0.75, 0.95)


def summarise(chains: list[dict[str, list[float]]]) -> dict[str, dict[str, Any]]:
    """``name -> {mean, sd, ess, mcse, quantiles, chain_sd_cv}`` of the draws of every
    parameter over all chains."""
    import tensorflow_probability as tfp

    out = {}
    for name in chains[0]:
        draws = np.stack([np.asarray(c[name], np.float64) for c in chains], axis=1)  # [n, C]
        ess = float(
            tfp.mcmc.effective_sample_size(
                draws, cross_chain_dims=1, filter_beyond_positive_pairs=True
            ).numpy()
        )
        sd = float(draws.std(ddof=1))
        chain_sds = draws.std(axis=0, ddof=1)
        out[name] = {
            "mean": float(draws.mean()),
            "sd": sd,
            "ess": ess,
            "mcse": sd / np.sqrt(ess),
            "quantiles": [float(q) for q in np.quantile(draws, QUANTILE_LEVELS)],
            "chain_sd_cv": float(chain_sds.std(ddof=1) / chain_sds.mean()),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="folder with one folder per posterior")
    parser.add_argument(
        "--posteriors",
        nargs="+",
        default=None,
        help="posteriordb names (default: every posterior folder here)",
    )
    args = parser.parse_args(argv)
    names = posteriors_here() if args.posteriors is None else args.posteriors
    unknown = sorted(set(names) - set(posteriors_here()))
    if unknown:
        parser.error(
            f"--posteriors: no folder with a model.stan here for {unknown}; copy the "
            "posterior's model.stan, posterior.json and data.json.zip first"
        )
    derive = families().REFERENCE_PARAMETERS
    for name in names:
        path = args.source / name / "reference_draws.json.zip"
        if not path.is_file():
            parser.error(f"source: no {name}/reference_draws.json.zip under {args.source}")
        chains = read_zipped_json(path)
        if not (isinstance(chains, list) and chains and isinstance(chains[0], dict)):
            raise ValueError(f"{path}: expected a JSON list of chains, each a dict of draws")
        if name in derive:
            # The parameters computed from each draw, then the reference's own names.
            chains = [
                {
                    **{k: v.tolist() for k, v in derive[name](as_arrays(c)).items()},
                    **c,
                }
                for c in chains
            ]
        doc = {
            "posterior": name,
            "num_chains": len(chains),
            "num_draws_per_chain": len(next(iter(chains[0].values()))),
            "ess_method": "tfp.mcmc.effective_sample_size(cross_chain_dims=1, "
            "filter_beyond_positive_pairs=True)",
            "parameters": summarise(chains),
        }
        with open(HERE / name / "reference.json", "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"{name}: {len(doc['parameters'])} parameters")


if __name__ == "__main__":
    main()
