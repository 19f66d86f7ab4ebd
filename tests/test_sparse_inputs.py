"""Sparse X for the estimators whose kernel needs dense inputs (RFFNet, SRFF, and RFFRidge and RFFClassifier with
their default features): densified, checked for memory."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.compose import make_column_transformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from rffkit import InsufficientMemoryError, RFFNetClassifier, RFFNetRegressor, RFFRidge, SRFFRegressor
from rffkit._memory import check_memory, estimate_peak_bytes


def _data(n=300, seed=0):
    """A one-hot block of 12 levels (a third of them shift y) beside a smooth numeric column."""
    rng = np.random.default_rng(seed)
    level, x = rng.integers(0, 12, n), rng.normal(size=n)
    X = np.column_stack([np.eye(12)[level], x])
    return X, np.sin(2 * x) + 0.8 * (level % 3 == 0) + 0.05 * rng.normal(size=n)


@pytest.mark.parametrize("make", [
    lambda: RFFNetRegressor(random_state=0, alpha=1e-3, max_iter=10),
    lambda: SRFFRegressor(random_state=0, n_components=50, alphas=[1e-3], max_iter=10),
    lambda: RFFRidge(random_state=0),  # was: a TypeError from the default feature map
    lambda: RFFRidge(alpha_selection="holdout", random_state=0),  # was refused, against its sparse tag (helper-43)
])
@pytest.mark.parametrize("container", [sp.csr_matrix, sp.csc_matrix, sp.coo_matrix])
def test_a_sparse_x_fits_and_predicts_as_its_dense_form(make, container):
    X, y = _data()
    dense = make().fit(X, y)
    sparse = make().fit(container(X), y)
    np.testing.assert_array_equal(sparse.predict(container(X[:50])), dense.predict(X[:50]))
    np.testing.assert_array_equal(sparse.predict(X[:50]), dense.predict(X[:50]))


def test_a_pipeline_with_a_sparse_one_hot_encoder_classifies():
    """OneHotEncoder's default output is sparse: RFFNetClassifier after it gives what the dense one does."""
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.integers(0, 30, 400).astype(str), rng.normal(size=400)]).astype(object)
    y = (X[:, 0].astype(int) % 2 == 0) ^ (X[:, 1].astype(float) > 0.5)
    probabilities = []
    for sparse_output in (True, False):
        encode = make_column_transformer((OneHotEncoder(sparse_output=sparse_output), [0]), (StandardScaler(), [1]))
        assert sp.issparse(encode.fit_transform(X)) == sparse_output
        classifier = RFFNetClassifier(random_state=0, alpha=1e-3, max_iter=10, n_components=300)
        model = make_pipeline(encode, classifier).fit(X, y)
        probabilities.append(model.predict_proba(X[:40]))
    np.testing.assert_array_equal(*probabilities)


def test_the_memory_check_counts_the_dense_copy(monkeypatch):
    X = sp.random(1000, 400, density=0.01, format="csr", random_state=0)
    for model in (RFFNetRegressor(), SRFFRegressor(), RFFRidge()):
        dense_need = estimate_peak_bytes(model, X.toarray())
        sparse_need = estimate_peak_bytes(model, X)
        assert sparse_need[0] == pytest.approx((dense_need[0] if dense_need else 0.0) + 8.0 * 1000 * 400)
    # a sparse table whose dense form would not fit is refused before anything is allocated
    monkeypatch.setattr("rffkit._memory.available_memory", lambda: 2_000_000)
    with pytest.raises(InsufficientMemoryError, match=r"a dense copy of the sparse 1,000 x 400 X.*RFFRidge or "
                       "RFFClassifier with a feature map that reads sparse X"):
        check_memory(RFFNetRegressor(), X, method="predict")
    from sklearn.kernel_approximation import RBFSampler

    assert "dense copy" not in estimate_peak_bytes(RFFRidge(features=RBFSampler()), X)[1]


def test_a_read_only_target_gives_no_torch_warning():
    """pandas' copy-on-write hands out read-only arrays; torch warns on (and could write to) them."""
    X, y = _data()
    y.setflags(write=False)
    X.setflags(write=False)
    SRFFRegressor(random_state=0, n_components=50, alphas=[1e-3], max_iter=10).fit(X, y)  # warnings are errors here
    RFFNetRegressor(random_state=0, alpha=1e-3, max_iter=10).fit(X, y)
