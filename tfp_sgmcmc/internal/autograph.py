"""AutoGraph for the user's code only, not for the library's.

A ``tf.function`` with AutoGraph on converts every Python function it reaches that is
not TensorFlow's (or TFP's) own: the library's loop, kernels and estimators included,
which costs seconds of source transformation once per process. The library's graph
code does not need it (its loops are ``tf.while_loop``, its branches ``tf.cond``/
``tf.where`` or Python conditions on static values), so its programs are traced with
``autograph=False``; the functions a user passes in (a log-likelihood with a Python
``if`` on a tensor, say) are converted where the library calls them
(`call_user`), as AutoGraph would have converted them when reached from converted
library code.

A user's own estimator or kernel class (a subclass defined outside the library) may
rely on AutoGraph in its methods: `needs_autograph` says when a program reaches
one, and that program is then traced with AutoGraph on, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["autograph_context", "call_user", "needs_autograph"]

_LIBRARY_PREFIXES = ("tfp_sgmcmc.", "tensorflow_probability.", "tensorflow.", "keras.")


def autograph_context() -> Any:
    """AutoGraph's status here (enabled, disabled or unspecified), for `call_user`:
    taken where the user hands a function to the library (``MinibatchEstimator``'s
    constructor), so a function given inside ``tf.function(autograph=False)`` or
    ``tf.autograph.experimental.do_not_convert`` stays unconverted."""
    return tf.__internal__.autograph.control_status_ctx()


def call_user(fn: Callable[..., Any], context: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, through AutoGraph while a graph is traced.

    Under tracing ``fn`` is called the way AutoGraph calls a function reached from
    converted code (``converted_call``: recursive, TensorFlow's and TFP's own functions
    left as they are, a callable object's ``__call__`` converted, a function it cannot
    convert run as written), unless ``context`` (from `autograph_context`) has AutoGraph
    off. The status of the library program being traced does not matter: it is
    ``autograph=False`` for the library's sake, not the user's. Eagerly ``fn`` is called
    as is: Python control flow on eager tensors needs no conversion.
    """
    if not tf.inside_function():
        return fn(*args, **kwargs)
    return tf.__internal__.autograph.tf_convert(fn, context)(*args, **kwargs)


def _in(cls: type, prefixes: tuple[str, ...]) -> bool:
    return ((getattr(cls, "__module__", "") or "") + ".").startswith(prefixes)


def _users_class(obj: Any) -> bool:
    """``obj``'s class is the user's and the library calls its methods: a subclass of
    one of the library's classes (an estimator, a schedule, a data source), a TFP
    kernel, or an object with an estimator's full-data method."""
    cls = type(obj)
    if _in(cls, _LIBRARY_PREFIXES):
        return False
    return (
        any(_in(base, ("tfp_sgmcmc.",)) for base in cls.__mro__[1:])
        or isinstance(obj, tfp.mcmc.TransitionKernel)
        or callable(getattr(cls, "full_log_prob_and_gradient", None))
    )


def needs_autograph(*objects: Any, max_items: int = 1000) -> bool:
    """Whether a program built on ``objects`` (estimators, kernels, possibly wrapped
    one in another) reaches a class of the user's (`_users_class`) whose methods may
    rely on AutoGraph; ``False`` when every one is the library's (or TFP's) own, which
    call the user's functions through `call_user`. The search goes through the
    attributes of the library's objects (and of TFP kernels, their ``parameters``) and
    through lists, tuples and dicts of at most ``max_items`` items."""
    seen: set[int] = set()
    stack = list(objects)
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, (list, tuple, dict)):
            if len(obj) <= max_items:
                stack.extend(obj.values() if isinstance(obj, dict) else obj)
            continue
        if _users_class(obj):
            return True
        cls = type(obj)
        if _in(cls, ("tfp_sgmcmc.",)) or isinstance(obj, tfp.mcmc.TransitionKernel):
            stack.extend(getattr(obj, "__dict__", {}).values())
            params = getattr(obj, "parameters", None)  # a TFP kernel's inner kernels
            if isinstance(params, dict):
                stack.extend(params.values())
    return False
