"""The ``score`` of rffkit's estimators, on arrays and on sources.

On arrays it is scikit-learn's (``RegressorMixin``'s R^2, ``ClassifierMixin``'s accuracy); on a
:class:`~rffkit.io.TableSource`, an :class:`~rffkit.io.ArraySource` or a memory map the same
measure is summed chunk by chunk, by the estimator's ``_score_source(X, y)``.
"""

from __future__ import annotations

from sklearn.utils.validation import check_is_fitted

from ._guards import within_limits
from ._validation import scored_as_source

__all__ = ["StreamedScore"]


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
