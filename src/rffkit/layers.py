"""Torch modules: the ARD random Fourier feature layer of RFFNet.

Proposition 2 of Otto & Izbicki: if ``z`` is the random Fourier map of a kernel at unit
relevances, ``z(lambda o x)^T z(lambda o y)`` is an unbiased estimate of the ARD kernel
``k(lambda o (x - y))``. The random draws stay fixed (buffers) and only the relevances
``lambda`` are learned, so the layer can sit in front of any network.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .kernels import get_kernel

__all__ = ["ARDRandomFourierFeatures"]


class ARDRandomFourierFeatures(nn.Module):
    """``z(lambda o x) = sqrt(2 / D) cos((lambda o x) W + b)`` with learnable ``lambda``.

    Parameters
    ----------
    frequencies : Tensor of shape (n_features, n_components)
        Unit-relevance spectral draws ``W`` (kept fixed, stored as a buffer).
    offsets : Tensor of shape (n_components,)
        Phases ``b ~ Uniform(0, 2 pi)`` (buffer).
    relevances : Tensor of shape (n_features,)
        Initial relevances ``lambda`` (a learnable parameter, unconstrained in sign:
        the kernel depends on ``|lambda|`` only).

    Examples
    --------
    >>> import torch
    >>> layer = ARDRandomFourierFeatures.from_kernel(3, 16, random_state=0)
    >>> layer(torch.zeros(2, 3, dtype=torch.float64)).shape
    torch.Size([2, 16])
    """

    def __init__(self, frequencies, offsets, relevances):
        super().__init__()
        self.register_buffer("frequencies", frequencies)
        self.register_buffer("offsets", offsets)
        self.relevances = nn.Parameter(relevances.clone())

    @classmethod
    def from_kernel(
        cls,
        n_features,
        n_components,
        kernel="gaussian",
        *,
        relevance=None,
        random_state=0,
        dtype=torch.float64,
        device="cpu",
    ):
        """Draw ``W`` from ``kernel``'s spectral density and ``b`` uniformly.

        ``relevance`` (scalar or per feature) initialises ``lambda``; the default
        ``1 / sqrt(n_features)`` makes ``||lambda o (x - y)||`` of order one for
        standardised inputs, so every feature starts with a useful gradient (at
        ``lambda = 0`` every feature's gradient vanishes on symmetric problems).
        """
        rng = np.random.default_rng(random_state)
        unit = get_kernel(kernel).sample_frequencies(rng, n_features, n_components)
        phases = rng.uniform(0.0, 2.0 * np.pi, n_components)
        if relevance is None:
            relevance = 1.0 / math.sqrt(n_features)
        lam = np.broadcast_to(np.asarray(relevance, dtype=np.float64), (n_features,))
        as_t = lambda a: torch.as_tensor(np.array(a), dtype=dtype, device=device)  # noqa: E731
        return cls(as_t(unit), as_t(phases), as_t(lam))

    @property
    def n_components(self):
        return self.frequencies.shape[1]

    def forward(self, x, n_components=None):
        """Random features of ``x``; ``n_components`` uses only the first columns.

        The first ``k`` columns of a draw are themselves a valid draw of ``k``
        features, so a fit can grow ``k`` (coarse to fine) and keep its random map.
        """
        k = self.n_components if n_components is None else n_components
        projection = torch.addmm(self.offsets[:k], x * self.relevances, self.frequencies[:, :k])
        return torch.cos(projection) * math.sqrt(2.0 / k)

    def extra_repr(self):
        n_features, n_components = self.frequencies.shape
        return f"n_features={n_features}, n_components={n_components}"
