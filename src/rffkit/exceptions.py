"""The errors and warnings rffkit raises about its input, and the minimum data it accepts.

Minimum data
------------
- Every regressor and classifier needs at least **2 rows** to fit; fewer raise
  ``ValueError`` (``Found array with 1 sample(s) ...``). The transformers
  (:class:`~rffkit.RandomFourierFeatures`, :class:`~rffkit.RandomBinningFeatures`) fit on
  one row: they only draw random numbers for inputs of that width.
- :class:`~rffkit.SRFFRegressor` searching over several ``alphas`` needs at least 2 rows
  left for training after holding out ``validation_fraction`` (ValueError otherwise).
  :class:`~rffkit.RFFNetRegressor` and :class:`~rffkit.RFFNetClassifier` hold out a
  validation split only when it and the rest both have 2 rows or more.
- A fit is legal but unreliable on fewer than **20 rows**, or, for a classifier, with
  fewer than **10 rows in some class**: it warns with :class:`SmallSampleWarning`
  (the relevances, the chosen ``alpha`` and any validation score then rest on a handful
  of points).
- Columns must be numeric. A column of strings raises ``ValueError`` naming the column
  (by name for a DataFrame, by position otherwise) and pointing to
  ``sklearn.preprocessing.OneHotEncoder`` / ``OrdinalEncoder``; a regressor's ``y`` must
  be numeric too.

Error messages show at most a few values of an array, never the whole of it.

Divergence
----------
:class:`DivergenceError` is raised when the mini-batch solver (``solver='adam'``) keeps
producing a non-finite loss after halving its learning rate from the best state it
reached; the estimator stays as it was before ``fit``.

Memory
------
:class:`InsufficientMemoryError` is raised before a fit (or transform) whose estimated
peak memory exceeds the memory available; see :mod:`rffkit.config`. Where a chunked
path exists for the same rows (:class:`~rffkit.RFFRidge` on a dense array: the
sufficient statistics of :mod:`rffkit.io`'s streamed fit), the fit takes it instead,
with a :class:`ChunkedFitWarning`, and raises only when that does not fit either. A
streamed fit (:mod:`rffkit.io`) raises the subclass :class:`MemoryBudgetError` when the
statistics of the requested number of features do not fit its ``memory_budget``.
"""

from __future__ import annotations

__all__ = ["ChunkedFitWarning", "DivergenceError", "InsufficientMemoryError", "MemoryBudgetError", "SmallSampleWarning"]


class SmallSampleWarning(UserWarning):
    """A fit on fewer rows (or rows per class) than rffkit considers reliable.

    Raised as a warning, not an error, once the fit has succeeded (a fit that fails
    raises its error alone).

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from rffkit import RFFRidge
    >>> from rffkit.exceptions import SmallSampleWarning
    >>> X = np.arange(10.0).reshape(5, 2); y = np.arange(5.0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     model = RFFRidge(random_state=0).fit(X, y)
    >>> [type(w.message).__name__ for w in caught]
    ['SmallSampleWarning']
    >>> with warnings.catch_warnings():  # to silence it
    ...     warnings.simplefilter("ignore", SmallSampleWarning)
    ...     model = RFFRidge(random_state=0).fit(X, y)
    """


class InsufficientMemoryError(MemoryError):
    """A fit or transform would need more memory than the machine has available.

    Raised before anything large is allocated; the message says how much is needed, how
    much is available and which parameter lowers the need. A ``MemoryError``, so code
    that already catches those keeps working.

    Examples
    --------
    >>> from rffkit.exceptions import InsufficientMemoryError
    >>> issubclass(InsufficientMemoryError, MemoryError)
    True
    """


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss that lowering the step did not cure.

    Raised by the ``'adam'`` solver of :class:`~rffkit.RFFNetRegressor` and
    :class:`~rffkit.RFFNetClassifier` after ``max_divergence_restarts`` halvings of the
    learning rate, and by any RFFNet fit whose final parameters are not finite; the
    message names the parameters that help (a lower ``learning_rate``, a larger
    ``alpha``). A ``RuntimeError``: the inputs were valid,
    the optimisation failed on them.

    Examples
    --------
    >>> from rffkit.exceptions import DivergenceError
    >>> issubclass(DivergenceError, RuntimeError)
    True
    """


class ChunkedFitWarning(UserWarning):
    """A fit on arrays streamed their rows in chunks because the in-memory path would not fit.

    The model is the one the in-memory fit gives, up to rounding (the same penalties
    are scored by the same criterion, from ``Z^T Z`` accumulated chunk by chunk).

    Examples
    --------
    >>> from rffkit.exceptions import ChunkedFitWarning
    >>> issubclass(ChunkedFitWarning, UserWarning)
    True
    """


class MemoryBudgetError(InsufficientMemoryError, ValueError):
    """The statistics of the requested number of features do not fit the memory budget.

    An :class:`InsufficientMemoryError` (the memory guard's error) and a ValueError (a
    parameter to change: ``memory_budget`` or the number of features); raised by streamed
    fits before anything large is allocated.

    Examples
    --------
    >>> from rffkit.exceptions import InsufficientMemoryError, MemoryBudgetError
    >>> issubclass(MemoryBudgetError, InsufficientMemoryError) and issubclass(MemoryBudgetError, ValueError)
    True
    """
