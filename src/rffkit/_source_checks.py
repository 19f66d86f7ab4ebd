"""What a fit on a source records of its columns, and what ``predict`` and ``score`` check new rows against.

A fit on a :class:`~rffkit.io.TableSource` or an :class:`~rffkit.io.ArraySource` records the number
of columns, their names where they have names of their own, and a table source's standardisation
(:func:`record_source_columns`); the streamed ``predict`` and ``score`` read the new rows chunk by
chunk (:func:`prediction_chunks`) after :func:`check_columns_seen_in_fit` has refused rows in other
columns, order or units: without it a model predicts from them without a sign.
"""

from __future__ import annotations

import numpy as np

from ._input_messages import short_value as _short

__all__ = ["prediction_chunks", "record_source_columns", "scored_as_source", "check_columns_seen_in_fit"]


def prediction_chunks(source):
    """``source.iter_chunks()`` for a prediction or a score: all rows, whatever the rank. A
    :class:`TableSource` opened with the model's encoding tallies the categories that encoding
    does not know, and one warning per such column follows the pass (the rows are none of its
    categories, as ``handle_unknown='ignore'`` says), as the command line's ``predict`` gives."""
    from ._encoding import warn_unknown_categories
    from .io import TableSource

    if not isinstance(source, TableSource):
        yield from source.iter_chunks()
        return
    unknown = {}
    yield from source.iter_chunks(unknown=unknown)
    warn_unknown_categories(unknown, source.encoding)


def _scaling(source):
    """What the scaler of a standardised :class:`TableSource` learned, or None: its class and its fitted
    arrays (``mean_`` and ``scale_`` of a StandardScaler, ``min_`` and ``scale_`` of a MinMaxScaler, ...),
    copied."""
    scaler = source.scaler
    if scaler is None:
        return None
    arrays = {name: np.array(value, dtype=np.float64) for name, value in sorted(vars(scaler).items())
              if name.endswith("_") and not name.startswith("_") and isinstance(value, np.ndarray)
              and value.dtype.kind in "fiu" and value.shape == (source.n_features,)}
    return (type(scaler).__name__, arrays)


def _same_scaling(fitted, given):
    """Whether two :func:`_scaling` records describe one scaler: the same class and fitted arrays equal to
    rounding, 1e-6 relative (the means of one file learned over chunks of another size differ by about
    1e-9; a scaler learned on other rows differs by far more)."""
    if fitted[0] != given[0] or set(fitted[1]) != set(given[1]):
        return False
    scale = max((float(np.max(np.abs(a), initial=0.0)) for a in fitted[1].values()), default=0.0)
    return all(np.allclose(fitted[1][name], given[1][name], rtol=1e-6, atol=1e-8 * scale, equal_nan=True)
               for name in fitted[1])


def record_source_columns(estimator, source):
    """Store on ``estimator``, at the end of a fit on ``source``, what :func:`check_columns_seen_in_fit`
    checks new rows against: ``n_features_in_``, the column names of a :class:`TableSource` or of an
    :class:`ArraySource` of named columns (``feature_names_in_``), and a :class:`TableSource`'s
    means and scales of its standardisation
    (:meth:`TableSource.standardized`; None for columns as they are)."""
    from .io import TableSource

    estimator.n_features_in_ = source.n_features
    for name in ("feature_names_in_", "_source_scaling"):
        estimator.__dict__.pop(name, None)
    names = source_names(source)
    if names is not None:
        estimator.feature_names_in_ = names
    if isinstance(source, TableSource):
        estimator._source_scaling = _scaling(source)


def source_names(source):
    """The column names of ``source`` where it has names of its own (:func:`_named`), else None."""
    return np.asarray(source.feature_names, dtype=object) if _named(source) else None


def _named(source):
    """Whether ``source``'s columns have names of their own: a :class:`TableSource`'s, or those an
    :class:`ArraySource` was given or took from a DataFrame (not its default ``x0, x1, ...``)."""
    from .io import TableSource

    return isinstance(source, TableSource) or bool(getattr(source, "named", False))


def _check_scaling(estimator, source, method):
    """``ValueError`` when a :class:`TableSource` is standardised otherwise than the one ``estimator``
    was fitted on: the model would see its inputs in other units and predict wrongly without a sign."""
    if not hasattr(estimator, "_source_scaling"):  # fitted on arrays (or saved before this check)
        return
    fitted, given, owner = estimator._source_scaling, _scaling(source), type(estimator).__name__
    if fitted is None and given is not None:
        raise ValueError(f"{owner}.{method}: the model was fitted on a source whose columns were not "
                         "standardised, and this source is standardised (.standardized()); pass it as opened.")
    if fitted is not None and given is None:
        raise ValueError(f"{owner}.{method}: the model was fitted on standardised columns (a source's "
                         ".standardized()), and this source's columns are not standardised; open it as "
                         "open_table(..., encoding=train.encoding).standardized(train.scaler), train being the "
                         "standardised training source.")
    if fitted is not None and not _same_scaling(fitted, given):
        raise ValueError(f"{owner}.{method}: this source is standardised by another scaler than the training "
                         "source's (its means or scales differ); standardise new rows by the training "
                         "source's: .standardized(train.scaler).")


def scored_as_source(estimator, X, sample_weight):
    """Whether ``score`` reads ``X`` chunk by chunk: a source, or a memory map without ``sample_weight``
    (a weighted memory map is scored as an array); a ``ValueError`` for ``sample_weight`` with a source,
    which is scored unweighted."""
    from .io import ArraySource, TableSource

    if isinstance(X, (TableSource, ArraySource)):
        if sample_weight is not None:
            raise ValueError(f"{type(estimator).__name__}.score: sample_weight is for arrays; a source is scored "
                             "unweighted, chunk by chunk (score the rows as arrays to weight them).")
        return True
    return isinstance(X, np.memmap) and sample_weight is None


def check_columns_seen_in_fit(estimator, source, method="predict"):
    """Raise ``ValueError`` unless ``source`` has the columns ``estimator`` was fitted on.

    The number of columns must be ``n_features_in_``; a :class:`TableSource`, and an
    :class:`ArraySource` of named columns (a DataFrame's), must also have the names of
    ``feature_names_in_`` in the same order (the message names the missing ones) and,
    a :class:`TableSource`, when the fit recorded it (:func:`record_source_columns`), the
    standardisation of the training source: none, or its scaler's means and scales. Used
    by the estimators' streamed ``predict``/``score``.

    Parameters
    ----------
    estimator : estimator
        A fitted estimator with ``n_features_in_`` (and ``feature_names_in_`` when it
        was fitted on named columns).
    source : TableSource or ArraySource
        The rows to predict.
    method : str, default='predict'
        The method named in the message.

    Raises
    ------
    ValueError
        When the number, names or order of the columns differ from those seen in fit.
    """
    owner = type(estimator).__name__
    if source.n_features != estimator.n_features_in_:
        raise ValueError(f"X has {source.n_features} features, but {owner} is expecting "
                         f"{estimator.n_features_in_} features as input.")
    from .io import TableSource

    names = getattr(estimator, "feature_names_in_", None)
    if names is not None and _named(source) and list(names) != source.feature_names:
        missing = [name for name in names if name not in source.feature_names]
        detail = f"it lacks {missing}" if missing else "they come in another order"
        remedy = ("open it with the training encoding (open_table(..., encoding=training_source.encoding))"
                  if isinstance(source, TableSource) else
                  f"give the columns seen in fit, in their order ({_short(list(names))})")
        raise ValueError(f"{owner}.{method}: the source's columns differ from those seen in fit ({detail}); {remedy}.")
    if isinstance(source, TableSource):
        _check_scaling(estimator, source, method)
