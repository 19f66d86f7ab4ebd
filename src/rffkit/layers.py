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

__all__ = ["ARDRandomFourierFeatures", "RFFNetModule"]


class ARDRandomFourierFeatures(nn.Module):
    """``z(lambda o x) = sqrt(2 / D) cos((lambda o x) W + b)`` with learnable ``lambda``.

    With ``variant='cos_sin'`` the map is ``sqrt(2 / D) [cos((lambda o x) W),
    sin((lambda o x) W)]`` on ``ceil(D / 2)`` frequencies (the last sine dropped when
    ``D`` is odd): the same kernel estimate without the random phases, and every
    frequency in both phases. At the same ``D`` it fitted SE2 about 12% better in our
    tests (``z^T z`` averages ``cos(w^T delta)`` exactly instead of
    ``cos(w^T delta) + cos(w^T (x + y) + 2 b)``).

    Parameters
    ----------
    frequencies : Tensor of shape (n_features, n_frequencies)
        Unit-relevance spectral draws ``W`` (kept fixed, stored as a buffer).
    offsets : Tensor of shape (n_frequencies,)
        Phases ``b ~ Uniform(0, 2 pi)`` (buffer; zeros and unused for 'cos_sin').
    relevances : Tensor of shape (n_features,)
        Initial relevances ``lambda`` (a learnable parameter, unconstrained in sign:
        the kernel depends on ``|lambda|`` only).
    variant : {'cos', 'cos_sin'}, default='cos'
    n_components : int, default=None
        ``D``, the number of output columns: ``n_frequencies`` for 'cos', and
        ``2 n_frequencies`` or one less for 'cos_sin' (None: ``2 n_frequencies``).

    Examples
    --------
    >>> import torch
    >>> layer = ARDRandomFourierFeatures.from_kernel(3, 16, random_state=0)
    >>> layer(torch.zeros(2, 3, dtype=torch.float64)).shape
    torch.Size([2, 16])
    """

    def __init__(self, frequencies, offsets, relevances, variant="cos", n_components=None):
        super().__init__()
        if variant not in ("cos", "cos_sin"):
            raise ValueError(f"variant must be 'cos' or 'cos_sin', got {variant!r}.")
        n_frequencies = frequencies.shape[1]
        if variant == "cos":
            n_components = n_frequencies if n_components is None else n_components
            valid = n_components == n_frequencies
        else:
            n_components = 2 * n_frequencies if n_components is None else n_components
            valid = n_components in (2 * n_frequencies, 2 * n_frequencies - 1)
        if not valid:
            raise ValueError(
                f"n_components={n_components} does not match {n_frequencies} frequencies "
                f"for variant={variant!r}."
            )
        self.register_buffer("frequencies", frequencies)
        self.register_buffer("offsets", offsets)
        self.relevances = nn.Parameter(relevances.clone())
        self.variant = variant
        self._n_components = int(n_components)

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
        variant="cos",
    ):
        """Draw ``W`` from ``kernel``'s spectral density and ``b`` uniformly.

        ``relevance`` (scalar or per feature) initialises ``lambda``; the default
        ``1 / sqrt(n_features)`` makes ``||lambda o (x - y)||`` of order one for
        standardised inputs, so every feature starts with a useful gradient (at
        ``lambda = 0`` every feature's gradient vanishes on symmetric problems).
        """
        rng = np.random.default_rng(random_state)
        n_frequencies = n_components if variant == "cos" else (n_components + 1) // 2
        unit = get_kernel(kernel).sample_frequencies(rng, n_features, n_frequencies)
        phases = rng.uniform(0.0, 2.0 * np.pi, n_frequencies) if variant == "cos" else np.zeros(n_frequencies)
        if relevance is None:
            relevance = 1.0 / math.sqrt(n_features)
        lam = np.broadcast_to(np.asarray(relevance, dtype=np.float64), (n_features,))
        as_t = lambda a: torch.as_tensor(np.array(a), dtype=dtype, device=device)  # noqa: E731
        return cls(as_t(unit), as_t(phases), as_t(lam), variant=variant, n_components=n_components)

    @property
    def n_components(self):
        return self._n_components

    def replace(self, *, frequencies=None, offsets=None, relevances=None):
        """A new layer with some of this one's draws or relevances replaced (the rest shared)."""
        return type(self)(
            self.frequencies if frequencies is None else frequencies,
            self.offsets if offsets is None else offsets,
            self.relevances.detach() if relevances is None else relevances,
            variant=self.variant,
            n_components=self.n_components,
        )

    def forward(self, x, n_components=None):
        """Random features of ``x``; ``n_components`` uses only the first columns.

        The first ``k`` columns of a draw are themselves a valid draw of ``k``
        features, so a fit can grow ``k`` (coarse to fine) and keep its random map.
        """
        k = self.n_components if n_components is None else n_components
        scale = math.sqrt(2.0 / k)
        # without autograd the features are written in place: at n = 50k, D = 2272 the
        # out-of-place chain (cos, sin, cat, scale) held four more n x D/2 copies
        in_place = not (torch.is_grad_enabled() and (x.requires_grad or self.relevances.requires_grad))
        if self.variant == "cos":
            projection = torch.addmm(self.offsets[:k], x * self.relevances, self.frequencies[:, :k])
            return projection.cos_().mul_(scale) if in_place else torch.cos(projection) * scale
        m = (k + 1) // 2  # the first m frequencies: nested like the 'cos' columns
        projection = (x * self.relevances) @ self.frequencies[:, :m]
        if not in_place:
            return torch.cat([torch.cos(projection), torch.sin(projection)], dim=1)[:, :k] * scale
        features = torch.empty((x.shape[0], k), dtype=projection.dtype, device=projection.device)
        torch.cos(projection, out=features[:, :m])
        torch.sin(projection[:, : k - m], out=features[:, m:])
        return features.mul_(scale)

    def extra_repr(self):
        return (
            f"n_features={self.frequencies.shape[0]}, n_components={self.n_components}, "
            f"variant={self.variant!r}"
        )


class RFFNetModule(nn.Module):
    """RFFNet's network: the ARD random-feature layer, then a linear head or a ReLU MLP.

    With no hidden layer the head is ``beta^T z(lambda o x) + c`` (Otto & Izbicki,
    2022), initialised at ``beta = 0``; with hidden layers it is RFFNet+ (Otto, 2022),
    initialised by He's rule from ``generator`` (the global RNG is left untouched).

    Parameters
    ----------
    rff : ARDRandomFourierFeatures
    hidden_layer_sizes : tuple of int
    n_outputs : int
    generator : torch.Generator

    Examples
    --------
    >>> import torch
    >>> layer = ARDRandomFourierFeatures.from_kernel(3, 8, random_state=0)
    >>> net = RFFNetModule(layer, (), 1, torch.Generator().manual_seed(0))
    >>> net(torch.zeros(2, 3, dtype=torch.float64)).shape
    torch.Size([2, 1])
    """

    def __init__(self, rff, hidden_layer_sizes, n_outputs, generator):
        super().__init__()
        self.rff = rff
        widths = [rff.n_components, *hidden_layer_sizes, n_outputs]
        layers = []
        with torch.random.fork_rng(devices=[]):  # nn.Linear's own init reads the global RNG
            for i, (width_in, width_out) in enumerate(zip(widths[:-1], widths[1:])):
                linear = nn.Linear(width_in, width_out, dtype=rff.frequencies.dtype, device=rff.frequencies.device)
                with torch.no_grad():
                    if len(widths) == 2:  # plain RFFNet: beta = 0 is the ridge starting point
                        linear.weight.zero_()
                    else:
                        bound = math.sqrt(6.0 / width_in)
                        uniform = torch.rand(linear.weight.shape, generator=generator, dtype=linear.weight.dtype)
                        linear.weight.copy_((uniform * 2 - 1) * bound)
                    linear.bias.zero_()
                layers.append(linear)
                if i < len(widths) - 2:
                    layers.append(nn.ReLU())
        self.head = nn.Sequential(*layers)

    @property
    def first_linear(self):
        """The dense layer after the random features (the one ``alpha`` penalises)."""
        return self.head[0]

    def forward(self, x):
        return self.head(self.rff(x))
