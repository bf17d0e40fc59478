"""Silencing one TensorFlow log message that TFP's own code triggers."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["quiet_real_part_cast"]


class _RealPartCastFilter(logging.Filter):
    """Drops TensorFlow's "casting complex64 to float32 ... discard the imaginary part"."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not ("casting an input of type complex" in msg and "imaginary part" in msg)


@contextlib.contextmanager
def quiet_real_part_cast() -> Iterator[None]:
    """Hides one TensorFlow warning while the ESS is computed.

    ``tfp.mcmc.effective_sample_size`` gets the autocorrelation from
    ``tfp.stats.auto_correlation``, which takes the inverse FFT of the power spectrum and
    keeps its real part with ``tf.cast(complex64 -> float32)``; TensorFlow logs that cast
    as a possible mistake, and for this real input the dropped imaginary part is rounding
    noise. The cast is TFP's, so the filter wraps our call of it (only that message, only
    while the ESS is computed).
    """
    logger = logging.getLogger("tensorflow")
    flt = _RealPartCastFilter()
    logger.addFilter(flt)
    try:
        yield
    finally:
        logger.removeFilter(flt)
