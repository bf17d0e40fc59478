"""The ``tfp-sgmcmc`` command-line tool: ``sample``, ``diagnose``, ``tune``.

```none
tfp-sgmcmc sample   --model my_model.py:build --kernel sgld --step-size 1e-5 \
                    --num-samples 100000 --thin 10 --run-dir runs/a      [--resume|--overwrite]
tfp-sgmcmc posterior --model logistic_regression --num-results 1000 --out draws.npz
                                                      # every choice automatic, with a verdict
tfp-sgmcmc diagnose --run-dir runs/a                  # KSD, FSSD, ESS of the stored draws
tfp-sgmcmc tune     --model logistic_regression --kernel sgld \
                    --step-sizes 1e-6,1e-5,1e-4 --budget-steps 3000 --plot tune.png \
                    [--ray [ADDRESS]]     # arms in parallel on a local Ray or a cluster
```

Models follow the protocol of [`tfp_sgmcmc.driver.model`][tfp_sgmcmc.driver.model] (a Python file
whose ``build(**kwargs)`` returns a ``ModelSpec(estimator, init_state)``, or a
name of a [`tfp_sgmcmc.models`][tfp_sgmcmc.models] module such as ``logistic_regression``);
``--model-arg name=value`` passes keyword arguments.
``posterior`` runs [`tfp_sgmcmc.sample_posterior`][tfp_sgmcmc.sample_posterior] on the model's
estimator (mode, Laplace preconditioner, tuned step and batch size, independent
chains, a verdict), prints the summary table and the verdict, and exits with
status 1 when the verdict is ``failed``; ``--out`` writes the draws (``.npz``)
and ``--json`` the verdict, reasons, choices and timings.
``sample`` runs [`tfp_sgmcmc.driver.sample`][tfp_sgmcmc.driver.sample] (chunked, streamed to HDF5,
resumable bit for bit); the model and kernel arguments are stored in the run's
config, so ``--resume`` needs only ``--run-dir``. ``diagnose`` computes, on an
evenly thinned subset of the draws, full-data scores from the model's
estimator and the IMQ kernel Stein discrepancy [1], the FSSD [2] at test
locations drawn from the samples, and the ESS of every parameter (all draws)
[3]; it writes them to ``diagnostics.json`` in the run directory (read by
[`tfp_sgmcmc.export.to_arviz`][tfp_sgmcmc.export.to_arviz]). ``tune`` runs MAMBA [4] over a grid of
step sizes (and batch sizes), prints the round table and writes the plot;
with ``--ray`` each round's arms run in parallel on Ray actors
([`RayExecutor`][tfp_sgmcmc.tuning.ray_backend.RayExecutor], the ``ray`` extra),
each of which loads the model itself (``docs/scale_out.md``).

Errors the user can fix (a missing model, bad hyperparameters, an existing or
corrupted run directory) print one line ``tfp-sgmcmc: error: ...`` and exit
with status 2; Ctrl-C during ``sample`` exits with 130 after the last
checkpoint.

#### References

[1]: Jackson Gorham and Lester Mackey. Measuring sample quality with kernels.
     In _ICML_, 2017.
[2]: Wittawat Jitkrittum et al. A linear-time kernel goodness-of-fit test. In
     _NeurIPS_, 2017.
[3]: Charles J. Geyer. Practical Markov chain Monte Carlo. _Statistical
     Science_, 7(4), 1992.
[4]: Jeremie Coullon, Leah South and Christopher Nemeth. Stochastic gradient
     MCMC with multi-armed bandit tuning. _arXiv:2105.13059_, 2021.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["main", "console_main", "build_parser", "KERNELS"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CLIError(Exception):
    """A user-fixable problem: printed as one line, exit status 2."""


# --------------------------------------------------------------------------- #
# Parser
# --------------------------------------------------------------------------- #
def _model_args(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "--model",
        required=required,
        help="path/to/model.py[:function] (default function `build`) or a models/ name",
    )
    p.add_argument(
        "--model-arg",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="keyword argument of the model's build function (repeatable)",
    )


def _kernel_args(p: argparse.ArgumentParser, required: bool, chains: bool = True) -> None:
    p.add_argument("--kernel", required=required, help=f"one of {', '.join(_kernel_table())}")
    p.add_argument(
        "--kernel-arg",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="extra kernel argument, e.g. num_leapfrog_steps=5 (repeatable)",
    )
    p.add_argument("--temperature", type=float, default=None, help="temperature T (default 1)")
    if not chains:  # tune runs one chain per arm: nothing to share
        return
    p.add_argument(
        "--shared-batches",
        action="store_true",
        help="all chains share each step's minibatch (default with >= 2 chains: one "
        "minibatch per chain, so the chains are independent and R-hat/ESS mean what they say)",
    )


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``tfp-sgmcmc: error: argument --x: ...``), status 2."""

    def error(self, message: str) -> Any:  # argparse's signature: never returns
        msg = " ".join(message.split())
        self.exit(EXIT_USAGE, f"tfp-sgmcmc: error: {msg} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``tfp-sgmcmc``."""
    parser = _Parser(
        prog="tfp-sgmcmc", description="Stochastic-gradient MCMC for TensorFlow Probability."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    s = sub.add_parser("sample", help="run (or resume) a long chain streamed to a run directory")
    _model_args(s, required=False)
    _kernel_args(s, required=False)
    s.add_argument("--step-size", type=float, default=None, help="step size ε")
    s.add_argument("--num-samples", type=int, default=None, help="draws to keep")
    s.add_argument("--thin", type=int, default=None, help="keep every k-th state (default 1)")
    s.add_argument("--burnin", type=int, default=None, help="burn-in steps (default 0)")
    s.add_argument("--chunk-size", type=int, default=None, help="draws per chunk (default 1000)")
    s.add_argument("--seed", type=int, default=None, help="run seed (default 0)")
    s.add_argument("--run-dir", required=True, help="the run directory")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--resume", action="store_true", help="continue the run in --run-dir")
    g.add_argument("--overwrite", action="store_true", help="replace the run in --run-dir")
    s.add_argument("--no-xla", action="store_true", help="graph mode instead of XLA")
    s.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    q = sub.add_parser(
        "posterior", help="sample the posterior with every choice made from it, and a verdict"
    )
    _model_args(q, required=True)
    q.add_argument(
        "--num-results", type=int, default=1000,
        help="draws per chain at the least; more until R-hat and ESS are met (default 1000)",
    )
    q.add_argument("--num-chains", type=int, default=4, help="independent chains (default 4)")
    q.add_argument("--seed", type=int, default=0, help="seed in [0, 2**31) (default 0)")
    q.add_argument("--batch-size", type=int, default=None,
                   help="fix the batch size (default: full batches up to 10,000 examples, "
                   "else 1%% and 5%% tried)")
    q.add_argument("--out", default=None, help="write the draws here (.npz, by parameter name)")
    q.add_argument("--json", default=None,
                   help="write the verdict, reasons, choices and timings here")
    q.add_argument("--no-xla", action="store_true", help="graph mode instead of XLA")
    q.add_argument("--no-progress", action="store_true", help="hide the progress lines")

    d = sub.add_parser("diagnose", help="KSD / FSSD / ESS of a stored run")
    d.add_argument("--run-dir", required=True)
    _model_args(d, required=False)
    d.add_argument(
        "--max-samples",
        type=int,
        default=1000,
        help="draws (pooled over chains) used for KSD/FSSD (default 1000)",
    )
    d.add_argument("--burn", type=int, default=0, help="leading draws to drop (default 0)")
    d.add_argument("--num-locations", type=int, default=10, help="FSSD test locations")
    d.add_argument("--seed", type=int, default=0, help="seed of the FSSD locations")
    d.add_argument("--json", default=None, help="also write the results to this file")

    t = sub.add_parser("tune", help="MAMBA: pick hyperparameters by successive halving")
    _model_args(t, required=True)
    _kernel_args(t, required=True, chains=False)
    t.add_argument("--step-sizes", required=True, help="comma-separated step sizes")
    t.add_argument("--batch-sizes", default=None, help="comma-separated batch sizes")
    b = t.add_mutually_exclusive_group(required=True)
    b.add_argument("--budget-steps", type=float, help="total budget in sampler steps")
    b.add_argument("--budget-seconds", type=float, help="total budget in seconds of sampling")
    t.add_argument("--eta", type=int, default=3, help="pruning rate η (default 3)")
    t.add_argument("--metric", default="ksd", choices=["ksd", "fssd"])
    t.add_argument("--thin", type=int, default=10, help="thinning of the metric's samples")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument(
        "--plot",
        default=None,
        help="where to write the plot (PNG; replaced if it exists). Default: mamba.png, or "
        "mamba-2.png, mamba-3.png, ... if that exists (an existing file is never replaced "
        "unless named here)",
    )
    t.add_argument("--no-plot", action="store_true", help="do not write the plot (or --plot '')")
    t.add_argument("--no-xla", action="store_true")
    t.add_argument("--no-progress", action="store_true")
    t.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run each round's arms in parallel on Ray actors (needs tfp-sgmcmc[ray]); "
        "without ADDRESS start a local Ray (or join the one of RAY_ADDRESS / `ray start`), "
        "with ADDRESS (host:6379, ray://host:10001, auto) connect to that cluster",
    )
    return parser


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #
#: Python argument names of the driver, the tuner and the kernels -> the flag that sets them.
_FLAGS = {
    "step_size": "--step-size",
    "temperature": "--temperature",
    "num_samples": "--num-samples",
    "thin": "--thin",
    "num_burnin_steps": "--burnin",
    "chunk_size": "--chunk-size",
    "seed": "--seed",
    "run_dir": "--run-dir",
    "resume": "--resume",
    "overwrite": "--overwrite",
    "eta": "--eta",
    "metric": "--metric",
    "budget": "--budget-steps/--budget-seconds",
    "arms": "--step-sizes/--batch-sizes",
    "model": "--model",
}


#: ``tune`` sets the grid's axes with plural flags.
_TUNE_FLAGS = {"step_size": "--step-sizes", "batch_size": "--batch-sizes"}


def _flag_message(
    msg: str, kernel_args: Sequence[str] = (), flags: dict[str, str] | None = None
) -> str:
    """Rewrites Python argument names in ``msg`` as the flags that set them.

    The library's errors name their Python arguments (`` `step_size` ``,
    ``resume=True``); a command-line user needs the flag (``--step-size``,
    ``--resume``). ``flags`` overrides the default mapping (``tune``'s plural flags).
    """
    for name in kernel_args:
        msg = msg.replace(f"`{name}`", f"`--kernel-arg {name}`")
    for name, flag in {**_FLAGS, **(flags or {})}.items():
        msg = msg.replace(f"`{name}`", f"`{flag}`")
        msg = msg.replace(f"{name}=True", flag)
    return msg


def _check_kernel_args(cls: type, kernel_args: dict[str, Any]) -> None:
    """Refuses a ``--kernel-arg`` the kernel does not take (e.g. a typo), naming it."""
    from tfp_sgmcmc.internal.util import keyword_parameters

    names = keyword_parameters(cls)
    if names is None:
        return
    accepted = [n for n in names if n not in ("step_size", "temperature")]
    for name in kernel_args:
        if name in ("step_size", "temperature"):
            raise CLIError(
                f"`--kernel-arg {name}=...`: use `--{name.replace('_', '-')}` instead."
            )
        if name not in accepted:
            import difflib

            close = difflib.get_close_matches(name, accepted, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CLIError(
                f"`--kernel-arg {name}=...`: {cls.__name__} has no argument {name!r}{hint}; "
                f"it takes {', '.join(accepted) or 'none'}."
            )


def _make_kernel(cls: type, estimator: Any, kernel_args: dict[str, Any], **kwargs: Any) -> Any:
    _check_kernel_args(cls, kernel_args)
    try:
        return cls(estimator, **kwargs, **kernel_args)
    except (ValueError, TypeError) as e:
        raise CLIError(_flag_message(str(e), list(kernel_args))) from e


def _kernel_class(name: str) -> type:
    """The kernel class of ``--kernel name``: a ``cli_name`` (any case), the class name
    of a registered kernel, or a name ``tfp_sgmcmc.kernels`` exports for one (``SGLD``)."""
    import tfp_sgmcmc.kernels as kernels
    from tfp_sgmcmc.kernels.base import registered_kernels

    registry = registered_kernels()
    cls_name = _kernel_table().get(name.lower(), name)
    cls = registry.get(cls_name)
    if cls is None and cls_name in kernels.__all__:
        alias = getattr(kernels, cls_name, None)
        cls = alias if alias in registry.values() else None
    if cls is None:
        raise CLIError(f"unknown kernel {name!r}; choose one of {', '.join(_kernel_table())}.")
    return cls


def _parse_kv(items: Sequence[str] | None, what: str) -> dict[str, Any]:
    from tfp_sgmcmc.driver.model import parse_model_args

    try:
        return parse_model_args(list(items or []))
    except ValueError as e:
        raise CLIError(str(e).replace("--model-arg", what)) from e


def _float_list(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise CLIError(f"`{what}` must be comma-separated numbers, got {text!r}.") from e


def _param_names(spec: Any, init_state: Any) -> list[str]:
    n = len(init_state) if isinstance(init_state, (list, tuple)) else 1
    if spec.param_names is not None and len(spec.param_names) == n:
        return list(spec.param_names)
    return ["theta"] if n == 1 else [f"theta_{i}" for i in range(n)]


def _chains_estimator(estimator: Any, init_state: Any, shared: bool) -> tuple[Any, bool]:
    """The model's estimator with one minibatch per chain when the run has >= 2 chains.

    Multi-chain diagnostics (R-hat, between-chain variance, multi-chain ESS)
    assume independent chains; chains sharing a batch have correlated gradient
    noise (``docs/estimators.md``). Returns ``(estimator, independent)``.
    """
    import numpy as np

    already = bool(getattr(estimator, "independent_chains", False))
    if shared or already or not hasattr(estimator, "with_independent_chains"):
        return estimator, already
    base = getattr(estimator, "base", estimator)
    if not hasattr(base, "chain_shape"):
        return estimator, False
    if int(np.prod(base.chain_shape(init_state), dtype=np.int64)) < 2:
        return estimator, False
    try:
        return estimator.with_independent_chains(True), True
    except ValueError:  # e.g. a tf.data source: one batch per step only
        return estimator, False


def _accepts(model: str | None, name: str) -> bool:
    """Whether the build function of ``--model`` takes a keyword argument ``name``."""
    import inspect

    from tfp_sgmcmc.driver.model import ModelError, resolve_build

    if not model:
        return False
    try:
        params = inspect.signature(resolve_build(model)).parameters
    except (ModelError, TypeError, ValueError):
        return False  # _load reports a missing or broken model
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _load(model: str | None, model_args: dict[str, Any]) -> Any:
    from tfp_sgmcmc.driver.model import ModelError, load_model

    if not model:
        raise CLIError("`--model` is required (path/to/model.py[:function] or a models/ name).")
    try:
        return load_model(model, model_args)
    except ModelError as e:
        raise CLIError(f"--model {model}: {e}") from e
    except Exception as e:  # the user's build function failed: one line, naming the flag
        msg = f"{type(e).__name__}: {e}"
        raise CLIError(f"--model {model}: building the model failed: {msg}") from e


# --------------------------------------------------------------------------- #
# Checks that need no TensorFlow
# --------------------------------------------------------------------------- #
def _kernel_names() -> frozenset[str] | None:
    """The names ``tfp_sgmcmc.kernels`` exports, read from its source without importing it
    (that imports TensorFlow); ``None`` if the source cannot be read that way.

    ``tests/test_faults.py`` checks the reading agrees with the imported module.
    """
    from tfp_sgmcmc._kernel_names import kernels_all as _kernels_all

    names = _kernels_all()
    return None if names is None else frozenset(names)


def _source_cli_names() -> dict[str, str]:
    """Class name -> ``cli_name`` of the kernel classes of ``tfp_sgmcmc/kernels``, read
    from their source (a class body's ``cli_name = "..."``) without importing them."""
    import ast
    import glob

    import tfp_sgmcmc

    found: dict[str, str] = {}
    folder = os.path.join(os.path.dirname(tfp_sgmcmc.__file__), "kernels")
    for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError):
            continue
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and [getattr(t, "id", None) for t in item.targets] == ["cli_name"]
                    and isinstance(item.value, ast.Constant)
                    and isinstance(item.value.value, str)
                ):
                    found[node.name] = item.value.value
    return found


def _kernel_table() -> dict[str, str]:
    """``--kernel`` short name -> kernel class name, in the order ``tfp_sgmcmc.kernels``
    exports the classes: each kernel class's own ``cli_name``.

    Once the kernels are imported, read from the registry of kernel classes (so a kernel
    defined outside the package is there too); before, from the kernels' source, so that
    ``--help`` and the checks that need no TensorFlow do not import it.
    """
    kernels = sys.modules.get("tfp_sgmcmc.kernels")
    base = sys.modules.get("tfp_sgmcmc.kernels.base")
    if kernels is not None and base is not None and hasattr(kernels, "__all__"):
        named = {n: c.cli_name for n, c in base.registered_kernels().items() if c.cli_name}
        order = list(kernels.__all__)
    else:
        from tfp_sgmcmc._kernel_names import kernels_all as _kernels_all

        named, order = _source_cli_names(), _kernels_all() or []
    rank = {n: i for i, n in enumerate(order)}
    return {named[n]: n for n in sorted(named, key=lambda n: rank.get(n, len(rank)))}


class _KernelTable(Mapping[str, str]):
    """``KERNELS``: `_kernel_table` read afresh on every use (a kernel defined later is
    listed too)."""

    def __getitem__(self, name: str) -> str:
        return _kernel_table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_kernel_table())

    def __len__(self) -> int:
        return len(_kernel_table())

    def __repr__(self) -> str:
        return repr(_kernel_table())


#: ``--kernel`` short names -> kernel class names (case-insensitive; the class names and
#: the names ``tfp_sgmcmc.kernels`` exports for them work too).
KERNELS: Mapping[str, str] = _KernelTable()


def _check_kernel_name(name: str) -> None:
    """Refuses a ``--kernel`` that is neither a short name nor a name the kernels export."""
    if name.lower() in _kernel_table():
        return
    if "tfp_sgmcmc.kernels.base" in sys.modules:
        _kernel_class(name)  # the kernels are imported: ask their registry
        return
    names = _kernel_names()
    if names is None:
        return  # checked by _kernel_class, after the import
    if name not in names or name == "SGMCMCKernel" or name.endswith("Results"):
        raise CLIError(f"unknown kernel {name!r}; choose one of {', '.join(_kernel_table())}.")


def _check_number(flag: str, value: float | None, low: float, strict: bool) -> None:
    if value is None:
        return
    if not (math.isfinite(value) and (value > low if strict else value >= low)):
        raise CLIError(
            f"`{flag}` must be a finite number {'>' if strict else '>='} {low:g}, got {value!r}."
        )


def _check_ints(*flags: tuple[str, int | None, int]) -> None:
    for flag, value, low in flags:
        if value is not None and value < low:
            raise CLIError(f"`{flag}` must be an int >= {low}, got {value!r}.")


#: The driver's ``CHECKPOINT_FILE``, named here because importing the driver imports
#: TensorFlow (``tests/test_faults.py`` checks they agree).
_CHECKPOINT_FILE = "checkpoint.npz"


def _check_resumable(run_dir: str, flag: str = "--resume") -> None:
    """``--run-dir`` holds a checkpoint (what `--resume` and `diagnose` read first)."""
    if not os.path.isdir(run_dir):
        what = "there is no run to resume" if flag == "--resume" else "there is no run"
        raise CLIError(f"`--run-dir` {run_dir} does not exist: {what}.")
    if not os.path.exists(os.path.join(run_dir, _CHECKPOINT_FILE)):
        raise CLIError(
            f"`--run-dir` {run_dir} has no {_CHECKPOINT_FILE}: not a run directory, or a "
            "corrupted one."
        )


#: The driver's ``MAX_RUN_STEPS`` (step ``t``'s seed takes an int32 ``t``), named here
#: for the same reason (``tests/test_driver_integrity.py`` checks they agree).
_MAX_RUN_STEPS = 2**31 - 1


def _check_run_length(a: argparse.Namespace) -> None:
    """A run longer than the driver's seed rule allows, refused before anything is
    written (it raised ``MemoryError`` from a chunk plan of billions of entries)."""
    samples, thin, burnin = a.num_samples or 0, a.thin or 1, a.burnin or 0
    total = burnin + samples * thin
    if total > _MAX_RUN_STEPS:
        flag = "--burnin" if burnin > samples * thin else "--num-samples"
        raise CLIError(
            f"`{flag}` is too large: the run would take --burnin + --num-samples x --thin = "
            f"{total:,} steps, more than the {_MAX_RUN_STEPS:,} one run can (the seed of "
            "step t takes an int32 t). Split it into several runs with different seeds."
        )


def _check_model_sizes(items: Sequence[str] | None) -> None:
    """``--model-arg num_chains=N`` with ``N < 1``, refused by name before the model is
    built (HDF5 cannot store a state with no chains; h5py said only "All chunk
    dimensions must be positive")."""
    for item in items or []:
        key, sep, value = item.partition("=")
        if key.strip() != "num_chains" or not sep:
            continue
        try:
            n = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            continue  # not a number: the model says what it takes
        if isinstance(n, int) and not isinstance(n, bool) and n < 1:
            raise CLIError(f"`--model-arg {item.strip()}`: the number of chains must be >= 1.")


def _check_state_sizes(spec: Any, model_args: dict[str, Any]) -> None:
    """A built model whose initial state has a dimension of size 0, refused naming the
    ``--model-arg`` values that can cause it (non-positive numbers)."""
    import tensorflow as tf

    parts = spec.init_state if isinstance(spec.init_state, (list, tuple)) else [spec.init_state]
    for i, part in enumerate(parts):
        shape = tf.convert_to_tensor(part).shape.as_list()
        if 0 not in shape:
            continue
        suspects = [
            f"{k}={v}" for k, v in model_args.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v <= 0
        ]
        cause = (
            f"`--model-arg {', '.join(suspects)}`" if suspects else "the model's `--model-arg`s"
        )
        raise CLIError(
            f"{cause}: the model's initial state (part {i}) has shape {shape}, with a "
            "dimension of size 0; every size (chains included) must be >= 1."
        )


def _precheck(a: argparse.Namespace) -> None:
    """The flag values that can be refused without TensorFlow, before it is imported and
    the model built (which takes seconds): out-of-range numbers, an unknown kernel, a
    run directory that cannot be resumed, a missing required flag."""
    if a.command == "sample":
        _check_ints(("--num-samples", a.num_samples, 1), ("--thin", a.thin, 1),
                    ("--chunk-size", a.chunk_size, 1), ("--burnin", a.burnin, 0),
                    ("--seed", a.seed, 0))
        _check_number("--step-size", a.step_size, 0.0, strict=True)
        _check_number("--temperature", a.temperature, 0.0, strict=False)
        _check_run_length(a)
        _check_model_sizes(a.model_arg)
        if a.kernel is not None:
            _check_kernel_name(a.kernel)
        if a.resume:
            _check_resumable(a.run_dir)
            return
        if os.path.exists(a.run_dir) and not os.path.isdir(a.run_dir):
            raise CLIError(f"`--run-dir` {a.run_dir} is a file, not a directory.")
        for flag, value in (("--model", a.model), ("--kernel", a.kernel),
                            ("--step-size", a.step_size), ("--num-samples", a.num_samples)):
            if value is None:
                raise CLIError(f"`{flag}` is required (or `--resume` an existing run).")
    elif a.command == "diagnose":
        for name in ("max_samples", "num_locations"):
            if getattr(a, name) < 2:
                raise CLIError(f"`--{name.replace('_', '-')}` must be >= 2.")
        _check_ints(("--burn", a.burn, 0), ("--seed", a.seed, 0))
        _check_resumable(a.run_dir, "--run-dir")
    elif a.command == "posterior":
        _check_ints(("--num-results", a.num_results, 4), ("--num-chains", a.num_chains, 2),
                    ("--seed", a.seed, 0))
        if a.batch_size is not None:
            _check_ints(("--batch-size", a.batch_size, 1))
        for flag, path, ext in (("--out", a.out, ".npz"), ("--json", a.json, ".json")):
            if path is None:
                continue
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise CLIError(f"`{flag}` {path!r}: directory {parent!r} does not exist.")
            if not path.endswith(ext):
                raise CLIError(f"`{flag}` {path!r} must end with {ext}.")
    elif a.command == "tune":
        _check_kernel_name(a.kernel)
        _check_number("--temperature", a.temperature, 0.0, strict=False)
        _check_number("--budget-steps", a.budget_steps, 0.0, strict=True)
        _check_number("--budget-seconds", a.budget_seconds, 0.0, strict=True)


# --------------------------------------------------------------------------- #
# Commands
# --------------------------------------------------------------------------- #
def _cmd_sample(a: argparse.Namespace) -> int:
    from tfp_sgmcmc.driver import open_run, sample

    stored: dict[str, Any] = {}
    cfg: dict[str, Any] = {}
    if a.resume:
        # The stored settings only: sample() checks every stored row under its lock.
        run = open_run(a.run_dir, verify=False)  # RunDirectoryError if missing/corrupted
        stored, cfg = run.metadata, run.config
        if not stored.get("cli"):
            raise CLIError(
                f"{a.run_dir} was not written by tfp-sgmcmc sample; resume it in Python."
            )

    def pick(value: Any, key: str, default: Any = None) -> Any:
        return value if value is not None else stored.get(key, default)

    model = pick(None if a.model is None else _absolute_model(a.model), "model")
    model_args = (
        _parse_kv(a.model_arg, "--model-arg") if a.model_arg else stored.get("model_args", {})
    )
    kernel_name = pick(a.kernel, "kernel")
    kernel_args = (
        _parse_kv(a.kernel_arg, "--kernel-arg") if a.kernel_arg else stored.get("kernel_args", {})
    )
    step_size = pick(a.step_size, "step_size")
    temperature = pick(a.temperature, "temperature", 1.0)
    if kernel_name is None:
        raise CLIError("`--kernel` is required.")
    if step_size is None:
        raise CLIError("`--step-size` is required.")
    num_samples = a.num_samples if a.num_samples is not None else cfg.get("num_samples")
    if num_samples is None:
        raise CLIError("`--num-samples` is required.")
    jit = (not a.no_xla) if not a.resume else (cfg.get("jit_compile", True) and not a.no_xla)

    spec = _load(model, model_args)
    _check_state_sizes(spec, model_args)
    cls = _kernel_class(kernel_name)
    estimator, independent = _chains_estimator(
        spec.estimator, spec.init_state, bool(getattr(a, "shared_batches", False))
    )
    kernel = _make_kernel(
        cls, estimator, kernel_args, step_size=step_size, temperature=temperature
    )
    metadata = {
        "independent_chains": independent,
        "cli": True,
        "model": model,
        "model_args": model_args,
        "kernel": kernel_name,
        "kernel_args": kernel_args,
        "step_size": step_size,
        "temperature": temperature,
        "param_names": _param_names(spec, spec.init_state),
    }
    run = sample(
        kernel,
        spec.init_state,
        num_samples,
        a.run_dir,
        seed=a.seed if a.seed is not None else (cfg.get("seed") or 0),
        thin=a.thin if a.thin is not None else cfg.get("thin", 1),
        num_burnin_steps=a.burnin if a.burnin is not None else cfg.get("num_burnin_steps", 0),
        chunk_size=a.chunk_size if a.chunk_size is not None else cfg.get("chunk_size", 1000),
        resume=a.resume,
        overwrite=a.overwrite,
        jit_compile=jit,
        progress=not a.no_progress,
        metadata=metadata,
    )
    tr = run.trace()
    n_div = int(tr["diverged"].sum()) if "diverged" in tr else 0
    print(
        f"{run.num_written} draws of {cls.__name__} in {run.run_dir} "
        f"(chains {run.batch_shape or [1]}, diverged {n_div})."
    )
    return 0


def _cmd_diagnose(a: argparse.Namespace) -> int:
    import numpy as np
    import tensorflow as tf

    from tfp_sgmcmc.diagnostics import effective_sample_size, fssd, kernel_stein_discrepancy
    from tfp_sgmcmc.driver import open_run
    from tfp_sgmcmc.export import DIAGNOSTICS_FILE, SHARED_MINIBATCH_NOTE, chains_independent
    from tfp_sgmcmc.internal.quiet import quiet_real_part_cast as _quiet_real_part_cast
    from tfp_sgmcmc.tuning.metrics import FullDataScorer

    run = open_run(a.run_dir)  # checks every stored row (flags were checked in _precheck)
    json_out = None if not a.json else _json_path(a.json, a.run_dir)  # before any work
    meta = run.metadata
    model = a.model or meta.get("model")
    model_args = (
        _parse_kv(a.model_arg, "--model-arg") if a.model_arg else meta.get("model_args", {})
    )
    if not model:
        raise CLIError("the run has no stored model: pass `--model`.")
    spec = _load(model, model_args)
    samples = run.samples()
    parts = list(samples) if isinstance(samples, list) else [samples]
    if run.num_written < 2:
        raise CLIError(
            f"`--run-dir` {a.run_dir} holds {run.num_written} draw(s); diagnose needs at least 2."
        )
    if not 0 <= a.burn < run.num_written - 1:
        raise CLIError(f"`--burn` must be in [0, {run.num_written - 2}], got {a.burn}.")
    parts = [p[a.burn :] for p in parts]
    nb = len(run.batch_shape)
    draws = parts[0].shape[0]
    chains = int(np.prod(run.batch_shape, dtype=np.int64)) if nb else 1
    # [draws, chains, *event]
    flat = [p.reshape((draws, chains) + p.shape[1 + nb :]) for p in parts]
    for p in flat:
        if not np.all(np.isfinite(p)):
            raise CLIError(f"{a.run_dir}: the draws contain non-finite values (diverged run).")
    # ESS on every draw (multi-chain estimator with >= 2 chains).
    with _quiet_real_part_cast():
        if chains >= 2:
            ess = effective_sample_size(
                [tf.constant(p) for p in flat], cross_chain_dims=[1] * len(flat)
            )
        else:
            ess = effective_sample_size([tf.constant(p[:, 0]) for p in flat])
    ess = [np.asarray(e) for e in ess]
    # KSD / FSSD on an evenly thinned pooled subset, with full-data scores.
    per_chain = max(1, min(draws, a.max_samples // chains))
    idx = np.unique(np.linspace(0, draws - 1, per_chain).round().astype(int))
    pooled = [p[idx].reshape((-1,) + p.shape[2:]) for p in flat]
    scores = FullDataScorer(spec.estimator)(pooled)  # the tuner's scorer: one compiled program
    ksd = float(
        kernel_stein_discrepancy(
            pooled if len(pooled) > 1 else pooled[0], scores if len(scores) > 1 else scores[0]
        )
    )
    rng = np.random.default_rng(a.seed)
    loc_idx = rng.choice(
        pooled[0].shape[0], size=min(a.num_locations, pooled[0].shape[0]), replace=False
    )
    locations = [p[loc_idx] for p in pooled]
    fssd_value = float(
        fssd(
            pooled if len(pooled) > 1 else pooled[0],
            scores if len(scores) > 1 else scores[0],
            locations if len(locations) > 1 else locations[0],
        )
    )
    tr = run.trace()
    names = meta.get("param_names") or (
        ["theta"] if len(parts) == 1 else [f"theta_{i}" for i in range(len(parts))]
    )
    all_ess = np.concatenate([e.ravel() for e in ess])
    result = {
        "num_draws": int(draws),
        "num_chains": chains,
        "burn": int(a.burn),
        "ksd": ksd,
        "ksd_num_samples": int(pooled[0].shape[0]),
        "fssd": fssd_value,
        "fssd_num_locations": int(len(loc_idx)),
        "ess_min": float(all_ess.min()),
        "ess_median": float(np.median(all_ess)),
        "ess_per_parameter": {n: e.tolist() for n, e in zip(names, ess)},
        "mean_stochastic_log_prob": float(np.mean(tr["target_log_prob"][a.burn :]))
        if "target_log_prob" in tr
        else None,
        "num_diverged": int(tr["diverged"].sum()) if "diverged" in tr else 0,
        "independent_chains": chains_independent(run),
    }
    # The KSD beside that of as many i.i.d. draws of the Laplace approximation.
    from tfp_sgmcmc.diagnostics import laplace_ksd_reference

    ref = laplace_ksd_reference(
        spec.estimator,
        [p.reshape((-1,) + p.shape[2:]).mean(0) for p in flat],
        int(pooled[0].shape[0]),
        seed=a.seed,
    )
    result["ksd_reference_laplace"] = None if ref is None else ref.ksd
    noise = _gradient_noise(spec, meta, [p[-1] for p in flat], run.batch_shape, a.seed)
    result["gradient_noise"] = None if noise is None else noise.to_dict()
    ref_text = "n/a (d too large or no Laplace approximation)" if ref is None else f"{ref.ksd:.6g}"
    rows = [
        ("draws x chains", f"{draws} x {chains}"),
        (f"KSD (IMQ, {result['ksd_num_samples']} samples, full-data scores)", f"{ksd:.6g}"),
        ("KSD of as many i.i.d. Laplace draws (reference)", ref_text),
        (
            "gradient-noise ratio r max / median (last draw)",
            "n/a (kernel not supported)"
            if noise is None
            else f"{noise.max:.3g} / {noise.median:.3g}"
            + (" (too large)" if noise.violated else ""),
        ),
        (
            f"FSSD² (Gaussian, {result['fssd_num_locations']} locations; unbiased estimate)",
            f"{fssd_value:.6g}" + (FSSD_NEGATIVE_NOTE if fssd_value < 0 else ""),
        ),
        ("ESS min / median", f"{result['ess_min']:.1f} / {result['ess_median']:.1f}"),
        (
            "chains' minibatches",
            "one chain"
            if chains < 2
            else {True: "independent", False: "SHARED (see below)", None: "not recorded"}[
                result["independent_chains"]
            ],
        ),
        ("diverged draws", str(result["num_diverged"])),
    ]
    print("| diagnostic | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    _write_json(os.path.join(a.run_dir, DIAGNOSTICS_FILE), result)
    if json_out:
        _write_json(json_out, result)
    if noise is not None and noise.violated:
        print(f"tfp-sgmcmc: warning: {noise.message()}", file=sys.stderr)
    if chains >= 2 and result["independent_chains"] is False:
        print(f"tfp-sgmcmc: warning: {SHARED_MINIBATCH_NOTE}", file=sys.stderr)
    return 0


#: Printed after a negative FSSD²: why it can be, and what it says.
FSSD_NEGATIVE_NOTE = (
    " (below 0: no misfit detected. The unbiased estimate of FSSD² ≥ 0 subtracts the "
    "diagonal terms, so it scatters around 0, either side, when the true FSSD² is about 0)"
)


def _gradient_noise(
    spec: Any, meta: dict[str, Any], last: list[Any], batch_shape: list[int], seed: int
) -> Any:
    """The gradient-noise ratio of the run's kernel at its last draw (``None`` if unknown)."""
    import numpy as np

    from tfp_sgmcmc.diagnostics import gradient_noise_ratio

    if not meta.get("kernel") or meta.get("step_size") is None:
        return None  # not written by `tfp-sgmcmc sample`: the kernel is unknown
    cls = _kernel_class(meta["kernel"])
    kernel = _make_kernel(
        cls,
        spec.estimator,
        dict(meta.get("kernel_args", {})),
        step_size=meta["step_size"],
        temperature=meta.get("temperature", 1.0),
    )
    state = [np.reshape(p, tuple(batch_shape) + p.shape[1:]) for p in last]
    return gradient_noise_ratio(kernel, state if len(state) > 1 else state[0], seed=seed)


def _write_json(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise CLIError(f"cannot write {path!r}: {e.strerror or e}.") from e


def _json_path(path: str, run_dir: str) -> str:
    """``--json``, checked before any work: a file in an existing directory, and not
    one of the run's own files (its config, checkpoint, samples)."""
    from tfp_sgmcmc.driver.lock import LOCK_FILE
    from tfp_sgmcmc.driver.sampler import RUN_FILES as _OUR_FILES

    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CLIError(f"`--json` {path!r}: directory {parent!r} does not exist.")
    if os.path.isdir(path):
        raise CLIError(f"`--json` {path!r} is a directory; give a file name (.json).")
    own = {os.path.abspath(os.path.join(run_dir, f)) for f in (*_OUR_FILES, LOCK_FILE)}
    own.discard(os.path.abspath(os.path.join(run_dir, "diagnostics.json")))
    if os.path.abspath(path) in own:
        raise CLIError(f"`--json` {path!r} is one of the run's own files; choose another path.")
    return path


def _absolute_model(model: str) -> str:
    """A model file path (``path.py`` or ``path.py:function``) made absolute; a
    built-in model's name as it is. The stored run then names the same file from
    any working directory (a resume, a Ray actor)."""
    path, sep, func = model.partition(".py")
    if sep and os.path.exists(path + ".py"):
        return os.path.abspath(path + ".py") + func
    return model


class _TuneProblem:
    """The ``tune`` problem as a picklable factory (for ``--ray``).

    Every Ray actor loads the model itself (data and estimators cannot travel
    between processes); a file path is made absolute, so actors whose working
    directory differs find it. In this process the model already loaded is
    reused (it is not pickled).
    """

    def __init__(
        self, model: str, model_args: dict[str, Any], kernel: str, kernel_kwargs: dict[str, Any],
        spec: Any = None,
    ) -> None:
        self.model = _absolute_model(model)
        self.model_args = dict(model_args)
        self.kernel = kernel
        self.kernel_kwargs = dict(kernel_kwargs)
        self._spec = spec

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_spec": None}

    def __call__(self) -> Any:
        from tfp_sgmcmc.tuning import KernelSpec

        spec = self._spec if self._spec is not None else _load(self.model, self.model_args)
        return KernelSpec(_kernel_class(self.kernel), spec.estimator, **self.kernel_kwargs)


def _ray_executor(address: str) -> Any:
    """The executor of ``--ray [ADDRESS]`` ("" = local), or a one-line error without Ray."""
    try:
        from tfp_sgmcmc.tuning import RayExecutor

        return RayExecutor(address=address or None)
    except ImportError as e:
        raise CLIError(f"--ray needs Ray: {e}") from e


def _first_chain(estimator: Any, state: Any) -> Any:
    """``state`` without its leading chain dimensions (the model's ``init_state`` may
    hold several chains; ``sample_posterior`` starts its mode search from one point)."""
    import tensorflow as tf

    from tfp_sgmcmc.internal.util import as_parts, is_list_like

    base = getattr(estimator, "base", estimator)
    chain_ndims = len(base.chain_shape(state)) if hasattr(base, "chain_shape") else 0
    parts = [tf.convert_to_tensor(p) for p in as_parts(state)]
    for _ in range(chain_ndims):
        parts = [p[0] for p in parts]
    return parts if is_list_like(state) else parts[0]


def _cmd_posterior(a: argparse.Namespace) -> int:
    import numpy as np

    from tfp_sgmcmc.automatic import sample_posterior

    spec = _load(a.model, _parse_kv(a.model_arg, "--model-arg"))
    res = sample_posterior(
        spec.estimator,
        num_results=a.num_results,
        num_chains=a.num_chains,
        seed=a.seed,
        initial_state=_first_chain(spec.estimator, spec.init_state),
        batch_size=a.batch_size,
        jit_compile=not a.no_xla,
        progress=not a.no_progress,
    )
    names = list(res.draws)
    if spec.param_names and len(spec.param_names) == len(names):
        names = list(spec.param_names)
    res.draws = dict(zip(names, res.draws.values()))
    draws = res.draws
    print(res.summary())
    print(f"verdict: {res.verdict}" + "".join(f"\n  - {r}" for r in res.reasons))
    if a.out:
        np.savez(a.out, **{k: np.asarray(v) for k, v in draws.items()})
        print(f"draws written to {a.out} ({', '.join(names)}; [draws, num_chains, ...])")
    if a.json:
        doc = {
            "model": a.model,
            "verdict": res.verdict,
            "reasons": list(res.reasons),
            "step_size": res.step_size,
            "batch_size": res.batch_size,
            "num_steps_between_results": res.num_steps_between_results,
            "timings": res.timings,
            "notes": list(res.notes),
            "diagnostics": {k: np.asarray(v).tolist() for k, v in res.diagnostics.items()},
        }
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
        print(f"summary written to {a.json}")
    return 1 if res.verdict == "failed" else 0


def _cmd_tune(a: argparse.Namespace) -> int:
    try:
        from tfp_sgmcmc.tuning import (
            MAMBA,
            ArmSampling,
            KernelSpec,
            TuningProblem,
            grid,
            seconds,
            steps,
        )
    except ImportError as e:  # pragma: no cover - the tuning package ships with us
        raise CLIError(f"the tuning package is unavailable: {e}") from e

    # Checked before the run, not after it; an empty --plot, like --no-plot, writes none.
    plot = None if a.no_plot or a.plot == "" else _plot_path(a.plot)
    model_args = _parse_kv(a.model_arg, "--model-arg")
    if "num_chains" not in model_args and _accepts(a.model, "num_chains"):
        # MAMBA runs one chain per arm; a model file's default may build several.
        model_args["num_chains"] = 1
        print("tune: MAMBA runs one chain per arm: building the model with num_chains=1.")
    spec = _load(a.model, model_args)
    cls = _kernel_class(a.kernel)
    axes: dict[str, list[Any]] = {"step_size": _float_list(a.step_sizes, "--step-sizes")}
    if a.batch_sizes:
        sizes = _float_list(a.batch_sizes, "--batch-sizes")
        if any(not math.isfinite(b) or b != int(b) or b < 1 for b in sizes):
            raise CLIError(f"`--batch-sizes` must be positive integers, got {a.batch_sizes!r}.")
        axes["batch_size"] = [int(b) for b in sizes]
    kernel_kwargs = _parse_kv(a.kernel_arg, "--kernel-arg")
    _check_kernel_args(cls, kernel_kwargs)
    if a.temperature is not None:  # --temperature and the budget: checked in _precheck
        kernel_kwargs["temperature"] = a.temperature
    budget = steps(a.budget_steps) if a.budget_steps is not None else seconds(a.budget_seconds)
    if a.ray is None:
        problem_args: dict[str, Any] = dict(
            kernel=KernelSpec(cls, spec.estimator, **kernel_kwargs)
        )
    else:
        problem_args = dict(
            kernel=TuningProblem(_TuneProblem(a.model, model_args, a.kernel, kernel_kwargs, spec)),
            executor=_ray_executor(a.ray),
        )
    try:
        tuner = MAMBA(
            grid(**axes),
            spec.init_state,
            **problem_args,
            budget=budget,
            eta=a.eta,
            metric=a.metric,
            seed=a.seed,
            progress=not a.no_progress,
            sampling=ArmSampling(thin=a.thin, jit_compile=not a.no_xla),
        )
    except (ValueError, TypeError) as e:
        raise CLIError(_flag_message(str(e), list(kernel_kwargs), _TUNE_FLAGS)) from e
    except (RuntimeError, ConnectionError) as e:  # --ray: no cluster, or an actor failed
        raise CLIError(f"--ray: {' '.join(str(e).split())}") from e
    try:
        result = tuner.run()
    except ValueError as e:
        if "reshape" not in str(e).lower():
            raise
        # MAMBA's programs hold one chain; a state with chain dimensions fails to trace.
        raise CLIError(
            f"tune runs one chain per arm, but --model {a.model} builds a state with chain "
            "dimensions: make its build function return a single chain (e.g. a `num_chains` "
            "argument, which tune sets to 1)."
        ) from e
    print(result.to_markdown())
    print(result.summary())
    if plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        result.plot(plot)
        print(f"plot written to {plot}")
    return 0


def _plot_path(path: str | None) -> str:
    """``--plot``, checked before the run (its directory must exist); by default the
    first of ``mamba.png``, ``mamba-2.png``, ... that does not exist yet."""
    if path is not None:
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise CLIError(f"`--plot` {path!r}: directory {parent!r} does not exist.")
        if os.path.isdir(path):
            raise CLIError(f"`--plot` {path!r} is a directory; give a file name (.png).")
        ext = os.path.splitext(path)[1].lstrip(".").lower()
        # matplotlib would add ".png" to a bare name (and so write a file not named
        # here), and refuses an unknown format only after the whole run.
        from matplotlib.backend_bases import FigureCanvasBase

        formats = FigureCanvasBase.get_supported_filetypes()
        if not ext:
            raise CLIError(f"`--plot` {path!r} has no extension: give e.g. {path + '.png'!r}.")
        if ext not in formats:
            raise CLIError(
                f"`--plot` {path!r}: unknown image format {ext!r}; use one of "
                f"{', '.join(sorted(formats))}."
            )
        return path
    k = 1
    while os.path.exists(name := "mamba.png" if k == 1 else f"mamba-{k}.png"):
        k += 1
    return name


# --------------------------------------------------------------------------- #
# Entry point
# --------------------------------------------------------------------------- #
def _show_warning(message: Warning | str, category: type, filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    print(f"tfp-sgmcmc: warning: {' '.join(str(message).split())}", file=sys.stderr)


def console_main() -> int:
    """The ``tfp-sgmcmc`` command: [`main`][tfp_sgmcmc.cli.main], with library warnings
    (e.g. a tuner whose arms all failed) shown as one ``tfp-sgmcmc: warning:`` line
    each rather than with a source location. (Callers of ``main`` in their own
    process keep their warning handling.)"""
    warnings.showwarning = _show_warning
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``tfp-sgmcmc`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    # SG kernels are uncalibrated by design (no Metropolis step); TFP's sample_chain warns
    # about that on every call, which tells a CLI user nothing.
    warnings.filterwarnings(
        "ignore", message="supplied `TransitionKernel` is not calibrated", category=UserWarning
    )
    args = build_parser().parse_args(argv)
    try:
        _precheck(args)
    except CLIError as e:
        print(f"tfp-sgmcmc: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_USAGE
    # After parsing, so --help stays fast; before any command imports TensorFlow, so its
    # C++ start-up notices are hidden (tfp_sgmcmc/_startup.py).
    from tfp_sgmcmc import _startup

    _startup.import_tensorflow()
    from tfp_sgmcmc.driver import RunDirectoryError

    commands = {
        "sample": _cmd_sample,
        "posterior": _cmd_posterior,
        "diagnose": _cmd_diagnose,
        "tune": _cmd_tune,
    }
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        print("tfp-sgmcmc: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (CLIError, RunDirectoryError, ValueError, FileNotFoundError) as e:
        # ValueError: our constructors name the bad argument (house rule); one line,
        # with the Python argument names rewritten as the flags that set them (a
        # CLIError is worded for the command line already).
        msg = " ".join(str(e).split()) or type(e).__name__
        if not isinstance(e, CLIError):
            msg = _flag_message(msg)
        print(f"tfp-sgmcmc: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        # The driver words its own (a RunStorageError, above); this is a file a command
        # reads or writes itself. One line, and for `sample` what is safe on disk.
        print(f"tfp-sgmcmc: error: {_os_error_line(e, args)}", file=sys.stderr)
        return EXIT_USAGE


def _os_error_line(e: OSError, args: argparse.Namespace) -> str:
    """An ``OSError`` as one line (``strerror: filename``), with the draws a ``sample``
    run has safe on disk."""
    line = (e.strerror or " ".join(str(e).split()) or type(e).__name__) + (
        f": {e.filename}" if e.filename else ""
    )
    if args.command == "sample":
        from tfp_sgmcmc.driver.checkpoint import read_checkpoint

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                n = read_checkpoint(args.run_dir).num_written
        except (OSError, ValueError):
            return line
        line += f"; {n} draws are safe in {args.run_dir} (resume with --resume)"
    return line


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
