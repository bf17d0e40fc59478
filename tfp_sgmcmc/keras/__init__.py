"""Keras 3 models as SG-MCMC targets, and posterior-predictive helpers.

The only package of the library that imports Keras (besides the reference models
that build Keras networks). A Keras 3 model (TF
backend) becomes a posterior over its trainable weights:

```none
log π(W) = log p(W) + Σ_i log p(y_i | f_W(x_i))
```

The chain state is the list of trainable weights (one state part per
weight tensor); the network is evaluated with
``model.stateless_call(weights, non_trainable, x)`` so the weights are plain
tensors the kernels can differentiate and move (``model(x)`` reads Keras
variables and gives ``None`` gradients, as Keras 3 does). Data come as
arrays (an [`InMemoryData`][tfp_sgmcmc.data.InMemoryData], XLA-compilable) or as a
batched ``tf.data.Dataset`` (a [`DatasetData`][tfp_sgmcmc.data.DatasetData]; the
driver feeds it to XLA-compiled chunks, and it also runs step by step in graph mode).

Likelihoods: ``"categorical"`` (softmax logits), ``"bernoulli"`` (one logit),
``"gaussian"`` (mean, with ``noise_scale``) or a callable
``(y, outputs) -> per-example log-likelihood``. The contract (see
[`KerasPosterior`][tfp_sgmcmc.keras.KerasPosterior]): the model outputs
**logits** (no final softmax or sigmoid, or ``from_logits=False`` to say it
outputs probabilities), labels are
**integer class ids** (one-hot rows are accepted and converted). Prior: isotropic
``N(0, prior_scale² I)`` on every weight (the MAMBA BNN uses ``N(0, 1)``) or a
callable on the list of weights.

Chains: ``stateless_call`` evaluates one set of weights; states with leading
chain/sample dimensions (e.g. a block of posterior samples whose full-data
scores the KSD needs) are mapped over with ``tf.map_fn``.
"""

from tfp_sgmcmc.keras._errors import KerasDataError, KerasLikelihoodError, KerasSaveError
from tfp_sgmcmc.keras._model import BayesianModel
from tfp_sgmcmc.keras._posterior import KerasPosterior, output_activation
from tfp_sgmcmc.keras._predictive import posterior_predictive_metrics, predictive_probabilities
from tfp_sgmcmc.keras._tuning import Tuning

__all__ = [
    "BayesianModel",
    "KerasDataError",
    "KerasLikelihoodError",
    "KerasSaveError",
    "KerasPosterior",
    "Tuning",
    "output_activation",
    "predictive_probabilities",
    "posterior_predictive_metrics",
]
