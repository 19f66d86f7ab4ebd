"""Torch modules: the ARD random Fourier feature layer of RFFNet, and RFFNet's network.

Otto & Izbicki (2022, Prop. 2): if ``z`` is the random Fourier map of a kernel at unit
relevances, ``z(lambda o x)^T z(lambda o y)`` is an unbiased estimate of the ARD kernel
``k(lambda o (x - y))``. The random draws stay fixed (buffers) and only the relevances
``lambda`` are learned, so the layer can sit in front of any network.

References
----------
M. P. Otto and R. Izbicki (2022), "RFFNet: Scalable and interpretable kernel methods via
random Fourier features", arXiv.

M. P. Otto (2023), *Scalable and interpretable kernel methods based on random Fourier
features*, master's dissertation, University of São Paulo.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ._dense import cos, matmul, sin
from ._warp import piecewise_linear
from .kernels import get_kernel

__all__ = ["ARDRandomFourierFeatures", "RFFNetModule"]


class ARDRandomFourierFeatures(nn.Module):
    """``z(lambda o x) = sqrt(2 / D) cos((lambda o x) W + b)`` with learnable ``lambda``.

    With ``variant='cos_sin'`` the map is ``sqrt(2 / D) [cos((lambda o x) W),
    sin((lambda o x) W)]`` on ``ceil(D / 2)`` frequencies: for even ``D`` the same
    kernel estimate without the random phases, every frequency in both phases, with
    less variance at the same ``D`` for the Gaussian and Laplacian kernels (see
    Notes). For odd ``D`` the last frequency's sine is dropped, and its cosine, without
    a phase, adds ``k(lambda o (x + y)) / D`` to the estimate on average: a bias of at
    most ``1 / D``, well below the Monte-Carlo error ``O(1 / sqrt(D))``, that an even
    ``D`` avoids.

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
        The map: random phases, or cos/sin pairs without phases.
    n_components : int, default=None
        ``D``, the number of random-feature columns: ``n_frequencies`` for 'cos', and
        ``2 n_frequencies`` or one less for 'cos_sin' (None: ``2 n_frequencies``).
    linear : bool, default=False
        Append the ``n_features`` columns ``lambda o x``: the kernel becomes
        ``k(lambda o (x - y)) + (lambda o x)^T (lambda o y)``, an ARD kernel plus an ARD
        linear kernel with the same relevances (a feature of relevance 0 still has no
        effect), so trends that a stationary kernel cannot extrapolate -- a
        heavy-tailed input acting linearly -- are fitted by the linear part.

    Attributes
    ----------
    frequencies : Tensor of shape (n_features, n_frequencies)
        The fixed draws ``W`` (a buffer: saved and moved with the module).
    offsets : Tensor of shape (n_frequencies,)
        The fixed phases ``b`` (a buffer).
    relevances : torch.nn.Parameter of shape (n_features,)
        The learned relevances ``lambda``.
    n_components : int
        ``D``.
    linear : bool
        Whether the ``lambda o x`` columns follow the random features.
    width : int
        Output columns: ``D``, plus ``n_features`` when ``linear``.

    See Also
    --------
    rffkit.RandomFourierFeatures : the same map at fixed length scales, as a transformer.
    RFFNetModule : this layer followed by RFFNet's head.

    Notes
    -----
    ``z(x)^T z(y)`` averages ``cos(w^T delta)`` over the frequencies with
    ``delta = lambda o (x - y)``; with random phases each term adds
    ``cos(w^T (lambda o (x + y)) + 2 b)``, zero on average but not in a given draw.
    Against that, ``'cos_sin'`` spends two columns per frequency, so it averages half as
    many. Which variance is the smaller depends on the kernel and the distance: the
    ``'cos_sin'`` one for the Gaussian kernel at every distance (Sutherland & Schneider,
    2015, who derive both variances) and, as measured, for the Laplacian, but not for
    every kernel, even among those that decay (Cauchy and periodic kernels at some
    distances); benchmarks/results/kernel_approximation.md compares the two variants.

    References
    ----------
    M. P. Otto and R. Izbicki (2022), "RFFNet: Scalable and interpretable kernel methods
    via random Fourier features", arXiv.

    A. Rahimi and B. Recht (2007), "Random features for large-scale kernel machines",
    NeurIPS 2007.

    D. J. Sutherland and J. Schneider (2015), "On the error of random Fourier features",
    UAI 2015.

    Examples
    --------
    >>> import torch
    >>> layer = ARDRandomFourierFeatures.from_kernel(3, 16, random_state=0)
    >>> layer(torch.zeros(2, 3, dtype=torch.float64)).shape
    torch.Size([2, 16])
    """

    def __init__(self, frequencies, offsets, relevances, variant="cos", n_components=None, linear=False):
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
        self.linear = bool(linear)

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
        linear=False,
    ):
        """Draw ``W`` from ``kernel``'s spectral density and ``b`` uniformly.

        Parameters
        ----------
        n_features : int
            Input dimension.
        n_components : int
            ``D``, the number of output columns.
        kernel : str, Kernel or callable, default='gaussian'
            Any kernel :func:`rffkit.kernels.get_kernel` accepts: ``'gaussian'``,
            ``'laplacian'``, ``'cauchy'``, ``'matern12'``, ``'matern32'``,
            ``'matern52'``, ``'induced'``, ``'spline'``, a ``Kernel`` or a profile.
        relevance : float or array-like of shape (n_features,), default=None
            Initial ``lambda``; None gives ``1 / sqrt(n_features)``, which makes
            ``||lambda o (x - y)||`` of order one for standardised inputs, so every
            feature starts with a useful gradient (at ``lambda = 0`` every feature's
            gradient vanishes on symmetric problems).
        random_state : int, default=0
            Seed of the local generator of the draws.
        dtype : torch.dtype, default=torch.float64
            Precision of the buffers and the parameter.
        device : str or torch.device, default='cpu'
            Where they live.
        variant : {'cos', 'cos_sin'}, default='cos'
            The map (see the class).
        linear : bool, default=False
            Append the ``lambda o x`` columns (see the class).

        Returns
        -------
        ARDRandomFourierFeatures
            The new layer.
        """
        rng = np.random.default_rng(random_state)
        n_frequencies = n_components if variant == "cos" else (n_components + 1) // 2
        unit = get_kernel(kernel).sample_frequencies(rng, n_features, n_frequencies)
        phases = rng.uniform(0.0, 2.0 * np.pi, n_frequencies) if variant == "cos" else np.zeros(n_frequencies)
        if relevance is None:
            relevance = 1.0 / math.sqrt(n_features)
        lam = np.broadcast_to(np.asarray(relevance, dtype=np.float64), (n_features,))
        as_t = lambda a: torch.as_tensor(np.array(a), dtype=dtype, device=device)  # noqa: E731
        return cls(as_t(unit), as_t(phases), as_t(lam), variant=variant, n_components=n_components, linear=linear)

    @property
    def n_components(self):
        """``D``, the number of random-feature columns."""
        return self._n_components

    @property
    def width(self):
        """Output columns of :meth:`forward`: ``D``, plus ``n_features`` with the linear columns."""
        return self._n_components + (self.frequencies.shape[0] if self.has_linear else 0)

    @property
    def has_linear(self):
        """Whether the ``lambda o x`` columns follow (layers saved before they existed have none)."""
        return getattr(self, "linear", False)

    @property
    def input_range(self):
        """``(lower, upper)`` the trigonometric columns clamp their inputs to, or None (no clamping)."""
        lower, upper = getattr(self, "input_lower", None), getattr(self, "input_upper", None)
        return None if lower is None else (lower, upper)

    def set_input_range(self, lower, upper):
        """Clamp the inputs of the trigonometric columns to ``[lower, upper]`` per feature.

        A fitted model's range is that of its training inputs: beyond it the random
        features of a stationary kernel take pseudo-random values (a sum of cosines has no
        trend to follow), so the kernel part is held constant at the boundary, as a tree
        ensemble's prediction is, while the linear columns ``lambda o x`` (with ``linear``)
        keep extrapolating. Inside the range nothing changes.

        Parameters
        ----------
        lower, upper : array-like of shape (n_features,) or None
            The range of each input, in the units the layer sees (standardised inputs in
            the estimators); None removes the range.

        Returns
        -------
        ARDRandomFourierFeatures
            ``self``.
        """
        like = self.frequencies
        for name, bound in (("input_lower", lower), ("input_upper", upper)):
            self.register_buffer(name, None if lower is None else torch.as_tensor(bound, dtype=like.dtype,
                                                                                  device=like.device))
        return self

    @property
    def input_warp(self):
        """``(knots, values)`` of the map the trigonometric columns see their inputs through, or None."""
        knots = getattr(self, "warp_knots", None)
        return None if knots is None else (knots, self.warp_values)

    def set_input_warp(self, knots, values):
        """Pass the inputs of the trigonometric columns through monotone piecewise-linear maps.

        Feature ``j``'s input goes through the line segments joining the points
        ``(knots[j, k], values[j, k])``, held at ``values[j, 0]`` below the first knot and
        at the last value above the last knot: a quantile map of a heavy-tailed input to
        normal scores (:func:`rffkit._warp.quantile_warp`), so that the stationary kernel
        resolves the bulk of its values, and the identity clamped to the training range on
        the other inputs (what :meth:`set_input_range` does). The linear columns
        ``lambda o x`` keep the inputs as they are.

        Parameters
        ----------
        knots, values : array-like of shape (n_features, n_knots) or None
            Non-decreasing knots of each feature (repeated knots only at the end) and the
            values there, in the units the layer sees; None removes the maps.

        Returns
        -------
        ARDRandomFourierFeatures
            ``self``.
        """
        def buffer(array):  # a tensor (another layer's, on any device) or an array
            array = array if isinstance(array, torch.Tensor) else np.ascontiguousarray(array)
            return torch.as_tensor(array, dtype=self.frequencies.dtype, device=self.frequencies.device).contiguous()

        self.register_buffer("warp_knots", None if knots is None else buffer(knots))
        self.register_buffer("warp_values", None if knots is None else buffer(values))
        return self

    def kernel_inputs(self, x):
        """The inputs the trigonometric columns see: ``x`` through the input warp, or clamped to the input range.

        Parameters
        ----------
        x : Tensor of shape (n_samples, n_features)
            Inputs, in the layer's dtype and on its device.

        Returns
        -------
        Tensor of shape (n_samples, n_features)
            ``x`` itself when the layer has neither.
        """
        warp = self.input_warp
        if warp is not None:
            return piecewise_linear(x, *warp)
        bounds = self.input_range
        return x if bounds is None else torch.clamp(x, *bounds)

    def replace(self, *, frequencies=None, offsets=None, relevances=None, linear=None, n_components=None):
        """A new layer with some of this one's draws or relevances replaced (the rest shared).

        Parameters
        ----------
        frequencies : Tensor of shape (n_features, n_frequencies), default=None
            New draws ``W``; None keeps (shares) this layer's.
        offsets : Tensor of shape (n_frequencies,), default=None
            New phases ``b``; None keeps this layer's.
        relevances : Tensor of shape (n_features,), default=None
            New relevances; None copies this layer's current values.
        linear : bool, default=None
            Whether the ``lambda o x`` columns follow; None keeps this layer's choice.
        n_components : int, default=None
            ``D`` of the new draws; None keeps this layer's.

        Returns
        -------
        ARDRandomFourierFeatures
            The new layer, same variant, input range and input warp.
        """
        layer = type(self)(
            self.frequencies if frequencies is None else frequencies,
            self.offsets if offsets is None else offsets,
            self.relevances.detach() if relevances is None else relevances,
            variant=self.variant,
            n_components=self.n_components if n_components is None else n_components,
            linear=self.has_linear if linear is None else linear,
        )
        if self.input_range is not None:
            layer.set_input_range(*self.input_range)
        if self.input_warp is not None:
            layer.set_input_warp(*self.input_warp)
        return layer

    def forward(self, x, n_components=None):
        """Random features of ``x``; ``n_components`` uses only the first columns.

        The first ``k`` columns of a draw are themselves a valid draw of ``k``
        features, so a fit can grow ``k`` (coarse to fine) and keep its random map.
        With ``linear`` the ``n_features`` columns ``lambda o x`` follow the ``k``. With an
        input warp (:meth:`set_input_warp`) or range (:meth:`set_input_range`) the ``k``
        columns see ``x`` through it (:meth:`kernel_inputs`).

        Parameters
        ----------
        x : Tensor of shape (n_samples, n_features)
            Inputs, in the layer's dtype and on its device.
        n_components : int, default=None
            ``k``: compute only the first ``k`` columns; None computes all ``D``.

        Returns
        -------
        Tensor of shape (n_samples, k), or (n_samples, k + n_features) with ``linear``
            ``z(lambda o x)`` scaled by ``sqrt(2 / k)`` (then ``lambda o x``).
        """
        k = self.n_components if n_components is None else n_components
        scale = math.sqrt(2.0 / k)
        scaled = x * self.relevances
        plain = self.input_range is None and self.input_warp is None
        trig = scaled if plain else self.kernel_inputs(x) * self.relevances
        # without autograd the features are written in place: at n = 50k, D = 2272 the
        # out-of-place chain (cos, sin, cat, scale) held four more n x D/2 copies
        in_place = not (torch.is_grad_enabled() and (x.requires_grad or self.relevances.requires_grad))
        linear = self.has_linear
        if not in_place:  # the same operations out of place, so that both give the same bits
            if self.variant == "cos":
                features = cos(matmul(trig, self.frequencies[:, :k]) + self.offsets[:k]) * scale
            else:
                m = (k + 1) // 2  # the first m frequencies: nested like the 'cos' columns
                projection = matmul(trig, self.frequencies[:, :m])
                features = torch.cat([cos(projection), sin(projection[:, : k - m])], dim=1) * scale
            return torch.cat([features, scaled], dim=1) if linear else features
        if self.variant == "cos":
            projection = matmul(trig, self.frequencies[:, :k]).add_(self.offsets[:k])
            if not linear:
                return cos(projection, out=projection).mul_(scale)
        features = torch.empty((x.shape[0], k + (x.shape[1] if linear else 0)), dtype=trig.dtype, device=trig.device)
        if self.variant == "cos":
            cos(projection, out=features[:, :k])
        else:
            m = (k + 1) // 2
            projection = matmul(trig, self.frequencies[:, :m])
            cos(projection, out=features[:, :m])
            sin(projection[:, : k - m], out=features[:, m:k])
        features[:, :k].mul_(scale)
        if linear:
            features[:, k:] = scaled
        return features

    def extra_repr(self):
        """The dimensions shown in the module's ``repr``.

        Returns
        -------
        str
            ``n_features``, ``n_components`` and ``variant``.
        """
        return (
            f"n_features={self.frequencies.shape[0]}, n_components={self.n_components}, "
            f"variant={self.variant!r}" + (", linear=True" if self.has_linear else "")
        )


class RFFNetModule(nn.Module):
    """RFFNet's network: the ARD random-feature layer, then a linear head or a ReLU MLP.

    With no hidden layer the head is ``beta^T z(lambda o x) + c`` (Otto & Izbicki,
    2022), initialised at ``beta = 0``; with hidden layers it is RFFNet+ (Otto, 2023),
    initialised by He's rule from ``generator`` (the global RNG is left untouched).

    Parameters
    ----------
    rff : ARDRandomFourierFeatures
        The random-feature layer (its dtype and device are the network's).
    hidden_layer_sizes : tuple of int
        Widths of the ReLU layers between the features and the output; ``()`` for
        the linear head.
    n_outputs : int
        Number of outputs (1 for regression, one logit per class otherwise).
    generator : torch.Generator
        Source of the initial weights of an MLP head.

    Attributes
    ----------
    rff : ARDRandomFourierFeatures
        The random-feature layer.
    head : torch.nn.Sequential
        The linear layers (and ReLUs) after it.

    See Also
    --------
    ARDRandomFourierFeatures : the first layer.

    References
    ----------
    M. P. Otto and R. Izbicki (2022), "RFFNet: Scalable and interpretable kernel methods
    via random Fourier features", arXiv.

    M. P. Otto (2023), *Scalable and interpretable kernel methods based on random Fourier
    features*, master's dissertation, University of São Paulo.

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
        widths = [rff.width, *hidden_layer_sizes, n_outputs]
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
        """The network's outputs for inputs ``x``.

        Parameters
        ----------
        x : Tensor of shape (n_samples, n_features)
            Inputs, in the network's dtype and on its device.

        Returns
        -------
        Tensor of shape (n_samples, n_outputs)
            ``head(z(lambda o x))``.
        """
        return self.head(self.rff(x))
