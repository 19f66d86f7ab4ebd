"""Standardising a table source's columns: the StandardScaler that :meth:`rffkit.io.TableSource.standardized`
and ``rffkit fit`` put in front of RFFRidge and RFFClassifier, which leaves the columns of 0s and 1s as they are.

The ridge models' default feature map has one length scale for every column, set from the variance of
all of them, so columns in different units weigh unequally in its distances; standardised columns
weigh alike.
"""

from __future__ import annotations

import numpy as np

from ._encoding import MISSING

__all__ = ["unscaled_inputs", "leave_unscaled", "fit_scaler", "source_scaler", "zero_one"]


def zero_one(means, variances):
    """Which columns, by their means and variances (ddof 0), hold only 0s and 1s.

    A column is one of 0s and 1s exactly when ``E[x (x - 1)] = var + mean^2 - mean`` is 0 with
    some of each (``0 < mean < 1``), as ``x (x - 1)`` is positive at every other integer; for
    real values it would take values inside (0, 1) to balance others outside [0, 1] to within
    rounding. A 2 on one row in ``n`` leaves ``2 / n``, far above the rounding allowed.
    """
    means, variances = np.asarray(means, dtype=np.float64), np.asarray(variances, dtype=np.float64)
    return (0.0 < means) & (means < 1.0) & (np.abs(variances + means * means - means) <= 1e-9 * means)


def unscaled_inputs(source, scaler=None):
    """The positions of the inputs of ``source`` that hold 0 and 1, and the command line's StandardScaler
    leaves as they are (:func:`leave_unscaled`): one-hot columns, missing-value indicators and booleans,
    and, given the ``scaler`` fitted on the training rows, integer columns whose training values are all
    0 or 1 (:func:`zero_one`: the scaler's mean and variance tell it without another pass over the rows).
    Standardised, such a column makes a rare value a large number (a 1 on 3 rows of 400 becomes about 11.5),
    which puts its rows far from every other in the kernel's distance.
    """
    encoding, kinds = source.encoding, source._kinds
    positions = []
    for j, (name, column) in enumerate(zip(encoding.output_names, encoding.groups)):
        if scaler is not None and name == column and kinds.get(column) == "integer":
            if zero_one(scaler.mean_[j], scaler.var_[j]):
                positions.append(j)
        elif (column in encoding.categories or (name == f"{column}={MISSING}" and column in encoding.indicators)
              or (name == column and kinds.get(column) == "bool")):
            positions.append(j)
    return positions


def leave_unscaled(scaler, positions):
    """The fitted StandardScaler ``scaler``, made to leave the inputs at ``positions`` as they are (mean 0,
    scale 1)."""
    scaler.mean_[positions], scaler.scale_[positions] = 0.0, 1.0
    return scaler


def fit_scaler(source):
    """A StandardScaler fitted on every chunk of ``source`` in one pass (``partial_fit``), leaving no column
    out yet; ValueError for a source without rows."""
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler()
    for chunk in source.iter_chunks():
        scaler.partial_fit(chunk.X)
    if not hasattr(scaler, "scale_"):
        raise ValueError(f"{source!r} has no rows to learn the means and standard deviations of its columns from.")
    return scaler


def source_scaler(source):
    """The StandardScaler of ``source``'s columns (:func:`fit_scaler`) that leaves those of 0s and 1s as they
    are (:func:`unscaled_inputs`), as the command line's."""
    scaler = fit_scaler(source)
    return leave_unscaled(scaler, unscaled_inputs(source, scaler))
