"""`AttributeView`: the one-line read-only attribute the package uses for plain getters."""

from __future__ import annotations

import numpy as np
import pytest

import tfp_sgmcmc as sg
from tfp_sgmcmc.internal.util import AttributeView


class _Inner:
    def __init__(self) -> None:
        self.size = 7


class _Holder:
    size = AttributeView[int]("_inner.size")
    """The inner object's size."""
    inner = AttributeView[_Inner]("_inner")

    def __init__(self) -> None:
        self._inner = _Inner()


def test_reads_the_attribute_and_follows_dotted_paths():
    h = _Holder()
    assert h.inner is h._inner
    assert h.size == 7
    h._inner.size = 9  # a view, not a copy taken at construction
    assert h.size == 9


def test_is_read_only_and_names_the_attribute():
    h = _Holder()
    with pytest.raises(AttributeError, match="'size' is read-only"):
        h.size = 3
    assert h.size == 7


def test_class_access_returns_the_descriptor():
    assert isinstance(_Holder.size, AttributeView)


def test_library_getters_behave_as_properties():
    data = sg.InMemoryData((np.arange(10.0, dtype=np.float32),))
    est = sg.MinibatchEstimator(lambda theta, batch: 0.0 * theta, data, 5)
    assert est.data is data and est.batch_size == 5 and est.num_examples == 10
    with pytest.raises(AttributeError):
        est.batch_size = 6
