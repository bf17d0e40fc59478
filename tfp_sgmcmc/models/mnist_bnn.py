"""The MAMBA paper's 784-100-10 Bayesian neural network on MNIST (§4.3).

```none
β(θ, x) = softmax( softmax(xᵀB + b) A + a ),   p(y = k | θ, x) = β_k(θ, x)
B: 784×100,  b: 100,  A: 100×10,  a: 10,       every weight ~ N(0, 1)
log π(θ) = Σ_i log β_{y_i}(θ, x_i) − ½ ‖θ‖²    (+ const)
```

with the **softmax hidden activation** of the paper's formula and its code
(Coullon, South & Nemeth, App. C.3.1; ``sgmcmcjax``'s ``NN_model.py``), 79,510
weights, pixels scaled to ``[0, 1]`` (/255). Two implementations of the same
posterior, with the same state layout ``[B, b, A, a]``:

* `log_likelihood` / `log_prior`: plain TensorFlow, chain
  dimensions broadcast through ``einsum`` (used by the studies and the CLI,
  see ``docs/models.md``);
* `keras_posterior`: the same network as a Keras 3 ``Sequential``
  through `tfp_sgmcmc.keras.KerasPosterior`.

Data: `tfp_sgmcmc.models.data_files.load_mnist` (the four IDX files or
``mnist.npz``) or `synthetic_mnist`, an offline stand-in of the same
shape (60,000/10,000 images of 28×28 in ``[0, 1]``, ten classes).

#### References

[1]: Jeremie Coullon, Leah South and Christopher Nemeth. Efficient and
     generalizable tuning strategies for stochastic gradient MCMC.
     _Statistics and Computing_, 33, 2023 (arXiv:2105.13059). §4.3, App. C.3.
[2]: Tianqi Chen, Emily Fox and Carlos Guestrin. Stochastic gradient
     Hamiltonian Monte Carlo. In _ICML_, 2014.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tfp_sgmcmc.diagnostics.calibration import predictive_metrics
from tfp_sgmcmc.models._problem import TrainSplitMixin
from tfp_sgmcmc.models.data_files import load_mnist

__all__ = [
    "MnistBNN",
    "mnist_bnn",
    "synthetic_mnist",
    "GlyphStyle",
    "log_likelihood",
    "log_prior",
    "init_state",
    "keras_posterior",
    "predictive_log_probabilities",
    "PARAM_NAMES",
    "LAYER_SIZES",
]

LAYER_SIZES = (784, 100, 10)
PARAM_NAMES = ["B", "b", "A", "a"]


def init_state(seed: int = 0, scale: float = 1e-2, dtype: Any = np.float32) -> list[tf.Tensor]:
    """``[B, b, A, a]`` drawn ``N(0, scale²)`` (the authors' ``init_network``, scale 10⁻²)."""
    rng = np.random.default_rng(seed)
    d, h, k = LAYER_SIZES
    parts = [
        rng.normal(0, scale, (d, h)),
        rng.normal(0, scale, h),
        rng.normal(0, scale, (h, k)),
        rng.normal(0, scale, k),
    ]
    return [tf.constant(p, dtype) for p in parts]


def logits_fn(state: Any, x: tf.Tensor) -> tf.Tensor:
    """Output logits ``softmax(xB + b)A + a``: ``[..., n, 10]`` for weights with leading dims."""
    w1, b1, w2, b2 = state
    x = tf.cast(x, w1.dtype)
    if w1.shape.rank == 2:  # one set of weights: plain matmuls
        hidden = tf.nn.softmax(tf.matmul(x, w1) + b1, axis=-1)
        return tf.matmul(hidden, w2) + b2
    hidden = tf.nn.softmax(tf.einsum("nd,...dh->...nh", x, w1) + b1[..., None, :], axis=-1)
    return tf.einsum("...nh,...hk->...nk", hidden, w2) + b2[..., None, :]


def log_likelihood(state: Any, batch: Any) -> tf.Tensor:
    """Per-example ``log β_y(θ, x)`` for a batch ``(x [n, 784], y [n])``: ``[..., n]``."""
    x, y = batch
    logp = tf.nn.log_softmax(logits_fn(state, x), axis=-1)
    onehot = tf.one_hot(tf.cast(y, tf.int32), LAYER_SIZES[-1], dtype=logp.dtype)
    return tf.reduce_sum(logp * onehot, axis=-1)


def log_prior(state: Any) -> tf.Tensor:
    """``−½ Σ θ²`` (every weight ``N(0, 1)``), leading chain dimensions kept."""
    total = 0.0
    for w, rank in zip(state, (2, 1, 2, 1)):
        total += tf.reduce_sum(tf.square(w), axis=list(range(-rank, 0)))
    return -0.5 * total


def predictive_log_probabilities(
    samples: list[np.ndarray], x: np.ndarray, block: int = 5000
) -> np.ndarray:
    """Per-sample class log-probabilities ``[S, n, 10]`` (blocks of rows; one trace)."""
    fn = tf.function(lambda ws, xb: tf.nn.log_softmax(logits_fn(ws, xb), -1), reduce_retracing=True)
    x = np.asarray(x, np.float32)
    out = []
    for s in range(samples[0].shape[0]):
        ws = [tf.constant(np.asarray(p[s], np.float32)) for p in samples]
        rows = [fn(ws, tf.constant(x[i : i + block])).numpy() for i in range(0, x.shape[0], block)]
        out.append(np.concatenate(rows, 0))
    return np.stack(out, 0)


# --------------------------------------------------------------------------- #
# The offline stand-in
# --------------------------------------------------------------------------- #
def _stroke_prototypes(rng: np.random.Generator, num_classes: int, styles: int) -> np.ndarray:
    """``[num_classes, styles, 28, 28]`` glyphs: 2-4 random quadratic strokes, Gaussian pen."""
    yy, xx = np.mgrid[0:28, 0:28].astype(np.float64)
    out = np.zeros((num_classes, styles, 28, 28))
    for c in range(num_classes):
        base = rng.uniform(7, 21, size=(rng.integers(2, 5), 3, 2))  # strokes × control pts × xy
        for s in range(styles):
            ctrl = base + rng.normal(0, 1.5, base.shape)  # a writing style: jittered strokes
            img = np.zeros((28, 28))
            for p0, p1, p2 in ctrl:
                t = np.linspace(0, 1, 40)[:, None]
                pts = (1 - t) ** 2 * p0 + 2 * (1 - t) * t * p1 + t**2 * p2
                d2 = (xx[None] - pts[:, 0, None, None]) ** 2 + (
                    yy[None] - pts[:, 1, None, None]
                ) ** 2
                img = np.maximum(img, np.exp(-d2 / (2 * 1.1**2)).max(0))
            out[c, s] = img
    return out


class GlyphStyle(NamedTuple):
    """How `synthetic_mnist` draws its digits (see there)."""

    styles: int = 4  # glyphs per class
    blend: float = 0.45  # upper bound of the weight of the blended other-class glyph
    noise: float = 0.08  # standard deviation of the pixel noise on the ink


DEFAULT_STYLE = GlyphStyle()


def synthetic_mnist(
    num_train: int = 60_000,
    num_test: int = 10_000,
    seed: int = 0,
    style: GlyphStyle = DEFAULT_STYLE,
) -> dict[str, np.ndarray]:
    """MNIST-shaped synthetic digits: ``x`` ``float32 [n, 784]`` in ``[0, 1]``, ``y`` 0-9.

    Each class has ``style.styles`` glyphs of 2-4 random quadratic strokes drawn with a
    Gaussian pen (seeded). An image is one glyph of its class, shifted by up to
    ±3 pixels, blended with a random glyph of another class at weight
    ``w ~ U(0, style.blend)``, plus clipped pixel noise ``N(0, style.noise²)`` on the ink,
    then quantised to 256 grey levels like the real files.

    Why strokes rather than the 8×8 digits upsampled: upsampling 1,797 images
    to 70,000 would put augmented copies of the same originals in both splits
    (a leaked test set) and needs scikit-learn; a teacher network on noise
    images has none of MNIST's structure (mostly-zero background, spatially
    correlated ink, confusable classes). The blend makes some images
    genuinely ambiguous, so accuracy stays below 100% and calibration (ECE,
    MCE) is informative.
    """
    if num_train < 1 or num_test < 1:
        raise ValueError(f"`num_train` and `num_test` must be >= 1, got {num_train}, {num_test}.")
    styles, blend, noise = int(style.styles), float(style.blend), float(style.noise)
    if styles < 1:
        raise ValueError(f"`style.styles` must be >= 1, got {styles}.")
    if not 0.0 <= blend < 0.5:
        raise ValueError(
            f"`style.blend` must be in [0, 0.5) so the true class dominates, got {blend}."
        )
    rng = np.random.default_rng(seed)
    protos = _stroke_prototypes(rng, 10, styles)
    padded = np.pad(protos, ((0, 0), (0, 0), (3, 3), (3, 3)))
    n = num_train + num_test
    y = rng.integers(0, 10, n)
    other = (y + rng.integers(1, 10, n)) % 10
    x = np.empty((n, 784), np.uint8)
    chunk = 10_000
    for start in range(0, n, chunk):
        sl = slice(start, min(start + chunk, n))
        m = sl.stop - sl.start
        dy, dx = rng.integers(0, 7, (2, m))
        oy, ox = rng.integers(0, 7, (2, m))
        st, so = rng.integers(0, styles, (2, m))
        rows = np.arange(28)
        own = padded[y[sl], st][
            np.arange(m)[:, None, None],
            (dy[:, None] + rows)[:, :, None],
            (dx[:, None] + rows)[:, None, :],
        ]
        mix = padded[other[sl], so][
            np.arange(m)[:, None, None],
            (oy[:, None] + rows)[:, :, None],
            (ox[:, None] + rows)[:, None, :],
        ]
        w = rng.uniform(0, blend, (m, 1, 1))
        img = (1 - w) * own + w * mix
        img = img + noise * rng.standard_normal(img.shape) * (img > 0.05)
        x[sl] = np.round(255 * np.clip(img, 0, 1)).reshape(m, 784).astype(np.uint8)
    xf = x.astype(np.float32) / 255.0
    return {
        "x_train": xf[:num_train],
        "y_train": y[:num_train].astype(np.int32),
        "x_test": xf[num_train:],
        "y_test": y[num_train:].astype(np.int32),
        "source": np.asarray("synthetic"),
    }


# --------------------------------------------------------------------------- #
# The problem
# --------------------------------------------------------------------------- #
@dataclass
class MnistBNN(TrainSplitMixin):
    """The BNN problem: the data split, estimators and test metrics."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str = ""

    log_likelihood_fn = staticmethod(log_likelihood)
    log_prior_fn = staticmethod(log_prior)

    @property
    def num_parameters(self) -> int:
        d, h, k = LAYER_SIZES
        return d * h + h + h * k + k

    def estimator(
        self, batch_size: int, scheme: str = "random_window", full_data_chunk_size: int = 10_000
    ):
        """A `tfp_sgmcmc.MinibatchEstimator` of the plain-TF posterior."""
        from tfp_sgmcmc.data import InMemoryData
        from tfp_sgmcmc.estimators import MinibatchEstimator

        data = InMemoryData((self.x_train, self.y_train), scheme=scheme, name="mnist")
        return MinibatchEstimator(
            log_likelihood,
            data,
            int(batch_size),
            log_prior_fn=log_prior,
            full_data_chunk_size=int(full_data_chunk_size),
        )

    def metrics(
        self,
        samples: list[np.ndarray],
        max_samples: int = 100,
        num_bins: int = 10,
        paper_compatible: bool = False,
    ) -> dict[str, float]:
        """Accuracy, log-loss, ECE and MCE of the model-averaged predictive on the test set.

        ``p̄ = (1/S) Σ_s β(θ_s, x)`` (Bayesian model average); ECE/MCE from
        `tfp_sgmcmc.diagnostics.calibration.calibration_errors` with ``num_bins``
        equal-width bins, or the authors' binning (``paper_compatible``).
        """
        samples = [np.asarray(p) for p in samples]
        if samples[0].ndim == 2:  # one set of weights
            samples = [p[None] for p in samples]
        num = samples[0].shape[0]
        if num == 0:
            raise ValueError("`samples` is empty.")
        if num > max_samples:
            idx = np.linspace(0, num - 1, max_samples).round().astype(int)
            samples = [p[idx] for p in samples]
        logp = predictive_log_probabilities(samples, self.x_test).astype(np.float64)
        pbar = np.exp(np.logaddexp.reduce(logp, axis=0) - np.log(logp.shape[0]))
        return predictive_metrics(pbar, self.y_test, num_bins, paper_compatible)


def keras_posterior(problem: MnistBNN, seed: int = 0, scheme: str = "random_window"):
    """The same posterior as a Keras 3 ``Sequential`` through ``KerasPosterior``.

    ``Dense(100, activation="softmax")`` then ``Dense(10)``; categorical
    likelihood, ``N(0, 1)`` prior. Its state ``[kernel, bias, kernel, bias]``
    has the layout of `init_state`.
    """
    import keras

    from tfp_sgmcmc.data import InMemoryData
    from tfp_sgmcmc.keras import KerasPosterior

    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((LAYER_SIZES[0],)),
            keras.layers.Dense(LAYER_SIZES[1], activation="softmax"),
            keras.layers.Dense(LAYER_SIZES[2]),
        ]
    )
    data = InMemoryData((problem.x_train, problem.y_train), scheme=scheme, name="mnist")
    return KerasPosterior(model, data, likelihood="categorical", prior_scale=1.0)


def mnist_bnn(
    path: str | None = None, synthetic: bool = False, seed: int = 0, num_train: int | None = None
) -> MnistBNN:
    """Builds the BNN problem from MNIST files or the synthetic stand-in.

    Args:
      path: a directory with the four IDX files (plain or ``.gz``) or
        ``mnist.npz``, or the ``.npz`` file.
      synthetic: use `synthetic_mnist` (``seed``) instead; exactly one of
        ``path`` and ``synthetic`` must be given (never a silent fallback).
      seed: seed of the synthetic data. Default value: ``0``.
      num_train: keep only the first ``num_train`` training images (smoke
        tests). Default value: ``None`` (all).

    Raises:
      ValueError: both or neither of ``path`` and ``synthetic``;
        `tfp_sgmcmc.models.data_files.DataFileError` for bad files.
    """
    if (path is None) == (not synthetic):
        raise ValueError(
            "give exactly one of `path` (MNIST IDX directory or mnist.npz) and "
            "`synthetic=True` (the offline stand-in)."
        )
    raw = synthetic_mnist(seed=seed) if synthetic else load_mnist(path)
    xtr, ytr = raw["x_train"], raw["y_train"]
    if num_train is not None:
        if int(num_train) < 1:
            raise ValueError(f"`num_train` must be >= 1, got {num_train}.")
        xtr, ytr = xtr[: int(num_train)], ytr[: int(num_train)]
    return MnistBNN(xtr, ytr, raw["x_test"], raw["y_test"], source=str(raw["source"]))
