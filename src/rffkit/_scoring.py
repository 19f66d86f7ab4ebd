"""The ``score`` of rffkit's estimators, on arrays and on sources.

On arrays it is scikit-learn's (``RegressorMixin``'s R^2, ``ClassifierMixin``'s accuracy); on a
:class:`~rffkit.io.TableSource`, an :class:`~rffkit.io.ArraySource` or a memory map the same
measure is summed chunk by chunk, by the estimator's ``_score_source(X, y)``.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._guards import within_limits
from ._source_checks import scored_as_source
from ._streaming import RunningMoments, numeric_target

__all__ = ["StreamedScore", "streamed_r2"]


class StreamedScore:
    """Mixin, before scikit-learn's ``RegressorMixin`` or ``ClassifierMixin``: their ``score`` on arrays,
    ``_score_source(X, y)`` on a source (a weighted memory map is scored as an array)."""

    @within_limits
    def score(self, X, y=None, sample_weight=None):
        """R^2 (a regressor; the mean over targets) or accuracy (a classifier) of the predictions on
        ``(X, y)``, or on a source's rows and target, chunk by chunk.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), TableSource, ArraySource or numpy.memmap
        y : array-like of shape (n_samples,) or (n_samples, n_targets), default=None
            None when ``X`` is a source with a target.
        sample_weight : array-like of shape (n_samples,), default=None
            Arrays only.

        Returns
        -------
        score : float
        """
        if scored_as_source(self, X, sample_weight):
            check_is_fitted(self)
            return self._score_source(X, y)
        return super().score(X, y, sample_weight=sample_weight)


def streamed_r2(owner, chunks, predict, n_targets=1):
    """R^2 of ``predict(chunk.X)`` against each chunk's target, over every chunk: scikit-learn's
    ``r2_score`` (the mean over targets; a constant target scores 1 if predicted exactly, else 0;
    NaN for fewer than two rows) from one pass. The target's spread is summed by
    :class:`RunningMoments` about a shift, so a constant target has a spread of exactly 0, where
    ``r2_score``'s rounding can leave one of 1e-33 and a score of -1e33."""
    moments = RunningMoments()
    sse = np.zeros(n_targets)
    for chunk in chunks:
        y = numeric_target(owner, chunk.y, n_targets)
        error = np.asarray(predict(chunk.X), dtype=np.float64).reshape(y.shape) - y
        sse += np.einsum("ij,ij->j", error, error)
        moments.update(y)
    if moments.count == 0:
        raise ValueError(f"{owner}.score: the source has no rows.")
    if moments.count < 2:  # as r2_score: not defined on one row
        from sklearn.exceptions import UndefinedMetricWarning

        warnings.warn(f"{owner}.score: R^2 is not defined on fewer than two rows.", UndefinedMetricWarning,
                      stacklevel=3)
        return float("nan")
    total = np.asarray(moments.m2, dtype=np.float64)
    scores = np.where(total > 0, 1.0 - sse / np.where(total > 0, total, 1.0), np.where(sse == 0, 1.0, 0.0))
    return float(np.mean(scores))
