"""Every ``python`` example in the library's docstrings runs as written.

The examples are fenced ```` ```python ```` blocks (TFP's docstring style) under an
``#### Examples`` heading; each must be self-contained: it runs in a fresh namespace with
nothing imported. (The package writes no ``>>>`` doctests; a test below fails if one
appears, so it cannot go unchecked.)
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import textwrap
import warnings

import pytest

import tfp_sgmcmc

FENCE = re.compile(r"^([ \t]*)```python[ \t]*\n(.*?)^\1```[ \t]*$", re.M | re.S)


def _docstrings() -> dict[str, str]:
    """``{qualified name: docstring}`` of every module, class, function and method of the
    package (each object once, under the module that defines it)."""
    out: dict[str, str] = {}
    for info in pkgutil.walk_packages(tfp_sgmcmc.__path__, "tfp_sgmcmc."):
        module = importlib.import_module(info.name)
        if module.__doc__:
            out[info.name] = module.__doc__
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != info.name:
                continue
            if inspect.isclass(obj):
                if obj.__doc__:
                    out[f"{info.name}.{name}"] = obj.__doc__
                for attr, member in vars(obj).items():
                    fn = getattr(member, "__func__", member)
                    if inspect.isfunction(fn) and fn.__doc__:
                        out[f"{info.name}.{name}.{attr}"] = fn.__doc__
            elif inspect.isfunction(obj) and obj.__doc__:
                out[f"{info.name}.{name}"] = obj.__doc__
    return out


def extract_examples(doc: str) -> list[str]:
    """The code of every fenced ``python`` block of ``doc``, dedented."""
    return [textwrap.dedent(m.group(2)) for m in FENCE.finditer(doc)]


DOCS = _docstrings()
EXAMPLES = [
    # The Ray executor's example starts a local Ray: it runs with the other `cluster` tests.
    pytest.param(code, id=f"{name}[{i}]", marks=[pytest.mark.cluster] if ".ray_" in name else [])
    for name, doc in sorted(DOCS.items())
    for i, code in enumerate(extract_examples(doc))
]


def test_examples_are_found():
    # The kernels' and estimators' examples at least; guards against a broken extractor.
    ids = {p.id.rsplit("[", 1)[0] for p in EXAMPLES}
    assert "tfp_sgmcmc.kernels.langevin.SGLD" in ids
    assert "tfp_sgmcmc.kernels.stochastic_approximation.StochasticApproximation" in ids
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("code", EXAMPLES)
def test_docstring_example_runs(code):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="supplied `TransitionKernel` is not calibrated")
        exec(compile(code, "<docstring example>", "exec"), {"__name__": "__docstring_example__"})


def test_an_example_with_undefined_names_fails():
    # Power check: the StochasticApproximation example as it once was (x, y, sg undefined).
    old = """
    #### Examples

    ```python
    prior = sg.priors.SpikeAndSlabGroupLasso(v0=0.1, v1=10., b=None)
    est = sg.priors.SSGLEstimator(prior, (x, y), batch_size=100)
    ```
    """
    (code,) = extract_examples(old)
    with pytest.raises(NameError):
        exec(compile(code, "<old example>", "exec"), {})


def test_no_unchecked_doctests():
    assert not [n for n, d in DOCS.items() if ">>> " in d], "write examples as ```python blocks"
