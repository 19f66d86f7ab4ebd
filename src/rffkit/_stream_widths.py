"""The widths of RFFNet's streamed fit and their nested random-feature draws.

A streamed fit (:mod:`rffkit._rffnet_stream`, :mod:`rffkit._classifier_stream`) searches
the relevances on an in-memory sample with ``D_search`` features, then fits its head on
every row with ``D_head >= D_search``. ``D_search`` is what the in-memory fit would take for
the sample's training rows; ``D_head`` is ``n_components``, or by default what the
in-memory fit takes for all the training rows (``floor(sqrt(n) log n)``, at least
``min(n, varpro_min_features)``) but capped at ``stream_max_features``
(:func:`default_head_width`), lowered until its two ``D x D`` float64 statistics and the
eigendecomposition fit the memory budget (:func:`~rffkit._sufficient.max_components`). The
in-memory search on the sample must fit the budget as well (the estimate of
:mod:`rffkit._memory`). The search and the head run one after the other, so the peak is
the larger of the two, not their sum.

The draws are nested: the first ``k`` frequencies of a draw of ``K`` are a draw of ``k``
(:func:`truncated_layer`), and the head's draw keeps the draw of the in-memory cap first
(:func:`head_draw`), so the search layer does not depend on the head's width. The plain
widening of the head's layer (one of the candidates of
:func:`~rffkit._head_layer.head_layer_candidates`) is the kept search layer followed by the
frequencies ``k + 1 ... K`` of the same draw at the same relevances (:func:`extended_layer`;
after the frequency-alignment move, the aligned frequencies followed by the tail of the
original draw: the kernel is then a mixture of the aligned one and the ARD kernel at the
aligned layer's relevances, which that move multiplies by its scale, 1 to 3, so the tail can
be rougher than the searched kernel; the head's penalty, chosen on the validation rows,
weighs the two parts).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from sklearn.base import clone

from ._memory import _rffnet_fit as _in_memory_estimate
from ._search import varpro_n_components
from ._sufficient import MemoryBudgetError, agree, check_memory_budget, max_components
from ._validation import SEED_BOUND

__all__ = ["truncated_layer", "extended_layer", "default_head_width", "head_draw", "agreed_sizes"]


def _n_frequencies(variant, n_components):
    return n_components if variant == "cos" else (n_components + 1) // 2


def truncated_layer(layer, n_components):
    """The layer of the first ``n_components`` features of ``layer``'s draw (a valid draw itself)."""
    if n_components == layer.n_components:
        return layer
    k = _n_frequencies(layer.variant, n_components)
    return layer.replace(frequencies=layer.frequencies[:, :k].clone(), offsets=layer.offsets[:k].clone(),
                         n_components=n_components)


def extended_layer(found, full):
    """``found`` (a layer on the first frequencies of ``full``'s draw) followed by the rest of ``full``'s draw.

    The relevances are ``found``'s; the result has ``full.n_components`` features.
    """
    if found.n_components == full.n_components:
        return found
    k = found.frequencies.shape[1]
    frequencies = torch.cat([found.frequencies, full.frequencies[:, k:]], dim=1)
    offsets = torch.cat([found.offsets, full.offsets[k:]])
    return found.replace(frequencies=frequencies, offsets=offsets, n_components=full.n_components)


def default_head_width(n_train, settings):
    """The head's ``D`` of a streamed 'varpro' fit on ``n_train`` training rows, before the memory budget.

    The in-memory fit's :func:`~rffkit._search.varpro_n_components`, capped at
    ``settings.stream_max_features`` instead of ``settings.max_default_features``: the
    head holds ``D x D`` statistics, not the ``n x D`` features that cap is for.
    """
    return varpro_n_components(n_train, replace(settings, max_default_features=settings.stream_max_features))


def head_draw(estimator, n_features, d_head, seed, device):
    """The random-feature layer of a streamed fit's head: ``d_head`` columns, nested in the width.

    Its first ``min(d_head, settings.max_default_features)`` columns are the estimator's
    draw of that many (:meth:`~rffkit._rffnet_base.BaseRFFNet._draw_layer`); the rest
    come from another draw of the same kernel (:func:`extended_layer`). A draw of ``D``
    columns is not the first columns of a wider one, so without this a head wider than
    that cap would change the search layer (the first ``D_search`` columns) and with it
    the relevances.
    """
    base = min(d_head, estimator._settings.max_default_features)
    layer = estimator._draw_layer(n_features, base, seed, device)
    if d_head == base:
        return layer
    return extended_layer(layer, estimator._draw_layer(n_features, d_head, (seed + 1) % SEED_BOUND, device))


def _sizes(estimator, n_train, n_features, sample_train, budget, itemsize):
    """``(D_search, D_head)`` for ``n_train`` training rows, the sample's and the memory budget.

    ``itemsize``: bytes per feature value of the streamed blocks and the search.
    """
    owner, settings = type(estimator).__name__, estimator._settings
    search_default = varpro_n_components(sample_train, settings)
    if estimator.n_components is not None:
        head = int(estimator.n_components)
        check_memory_budget(head, budget, n_statistics=2, itemsize=itemsize, owner=owner,
                            parameter="memory_budget", lower="n_components")
    else:  # the in-memory fit's default for n_train rows, within the budget
        head = min(default_head_width(n_train, settings), max_components(budget, n_statistics=2, itemsize=itemsize))
        if head < 1:
            raise MemoryBudgetError(
                f"{owner}: memory_budget={budget / 1e9:.3g} GB does not hold the statistics of even "
                "one random feature; raise memory_budget.")
    search = min(head, search_default)
    probe = clone(estimator).set_params(n_components=search)
    needed = _in_memory_estimate(probe, sample_train, n_features, itemsize)[0]
    if needed > budget:
        raise MemoryBudgetError(
            f"{owner}: the relevance search on {sample_train} sampled rows with {search} features needs "
            f"about {needed / 1e9:.3g} GB, more than memory_budget={budget / 1e9:.3g} GB; raise memory_budget "
            "or lower n_components.")
    return search, head


def agreed_sizes(estimator, n_train, n_features, sample_train, budget, *, itemsize):
    """:func:`_sizes` on every rank; a rank whose budget is too small stops them all (collective)."""
    try:
        sizes, error = _sizes(estimator, n_train, n_features, sample_train, budget, itemsize), None
    except MemoryBudgetError as exc:
        sizes, error = None, exc
    agree(error)
    return sizes
