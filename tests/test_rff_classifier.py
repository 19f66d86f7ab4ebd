"""RFFClassifier against sklearn's LogisticRegression on the same random features.

Objective equivalence: ``LogisticRegression(C)`` minimises
``C sum_i loss_i + ||w||^2 / 2``, i.e. ``mean_i loss_i + ||w||^2 / (2 C n)``, so
``alpha = 1 / (C n)``. Both solvers run to tight tolerances; coefficients agree to
atol 1e-4 and probabilities to atol 1e-5 in float64 (L-BFGS stopping differences).

float32 L-BFGS stops where no step lowers the float32 objective (gradients of 1e-6 to 1e-5):
converged, without a ConvergenceWarning; its probabilities are within 1e-3 of float64's.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import SplineTransformer
from sklearn.utils._param_validation import InvalidParameterError

from rffkit import RandomFourierFeatures, RFFClassifier
from rffkit.io import ArraySource


def make_problem(n=150, n_classes=2, seed=0, labels=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    if n_classes == 2:
        index = (X[:, 0] * X[:, 1] > 0).astype(int)
    else:
        index = np.digitize(np.arctan2(X[:, 1], X[:, 0]), np.linspace(-np.pi, np.pi, n_classes + 1)[1:-1])
    labels = np.arange(n_classes) if labels is None else np.asarray(labels)
    return X, labels[index]


@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_matches_sklearn_logistic_regression(n_classes, fit_intercept):
    X, y = make_problem(n_classes=n_classes)
    features = RandomFourierFeatures(n_components=30, random_state=1)
    C = 5.0
    ours = RFFClassifier(
        features=features, alpha=1.0 / (C * X.shape[0]), fit_intercept=fit_intercept, tol=1e-9, max_iter=2000
    )
    ours.fit(X, y)
    Z = features.fit_transform(X)
    reference = LogisticRegression(C=C, fit_intercept=fit_intercept, tol=1e-12, max_iter=10_000).fit(Z, y)
    assert ours.coef_.shape == reference.coef_.shape
    np.testing.assert_allclose(ours.coef_, reference.coef_, atol=1e-4)
    np.testing.assert_allclose(ours.intercept_, reference.intercept_, atol=1e-4)
    np.testing.assert_allclose(ours.predict_proba(X), reference.predict_proba(Z), atol=1e-5)
    np.testing.assert_allclose(ours.decision_function(X), reference.decision_function(Z), atol=1e-4)
    np.testing.assert_array_equal(ours.predict(X), reference.predict(Z))


@pytest.mark.parametrize("labels", [["no", "yes"], [-1, 1], ["cat", "dog", "emu"]])
def test_labels_of_any_type_are_returned_as_given(labels):
    X, y = make_problem(n_classes=len(labels), labels=labels)
    model = RFFClassifier(random_state=0).fit(X, y)
    assert list(model.classes_) == sorted(labels)
    predicted = model.predict(X)
    assert set(predicted) <= set(labels) and predicted.dtype == np.asarray(labels).dtype
    assert model.score(X, y) > 0.85
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(model.classes_[np.argmax(proba, axis=1)], predicted)
    np.testing.assert_allclose(np.exp(model.predict_log_proba(X)), proba, rtol=1e-12)
    expected_shape = (X.shape[0],) if len(labels) == 2 else (X.shape[0], len(labels))
    assert model.decision_function(X).shape == expected_shape


def test_sparse_feature_output_is_supported():
    X, y = make_problem()
    dense = RFFClassifier(features=SplineTransformer(n_knots=6), tol=1e-9, max_iter=2000).fit(X, y)
    sparse = RFFClassifier(features=SplineTransformer(n_knots=6, sparse_output=True), tol=1e-9, max_iter=2000).fit(X, y)
    np.testing.assert_allclose(sparse.predict_proba(X), dense.predict_proba(X), atol=1e-8)


def test_float32_stays_float32(device):
    X, y = make_problem(n_classes=3)
    features = RandomFourierFeatures(n_components=30, random_state=2)
    model32 = RFFClassifier(features=features, alpha=1e-3, device=device).fit(X.astype(np.float32), y)
    model64 = RFFClassifier(features=features, alpha=1e-3, device=device).fit(X, y)
    assert model32.coef_.dtype == np.float32
    assert model32.decision_function(X.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(model32.predict_proba(X.astype(np.float32)), model64.predict_proba(X), atol=1e-3)


def test_errors_are_actionable():
    X, y = make_problem()
    with pytest.raises(ValueError, match="only one class"):
        RFFClassifier().fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="Unknown label type"):
        RFFClassifier().fit(X, np.linspace(0, 1, X.shape[0]))
    with pytest.raises(InvalidParameterError, match="alpha"):
        RFFClassifier(alpha=-1.0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="max_iter"):
        RFFClassifier(max_iter=0).fit(X, y)
    bad = X.copy()
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="Input X contains infinity"):
        RFFClassifier().fit(bad, y)
    model = RFFClassifier(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="X has 1 features, but RFFClassifier is expecting 2"):
        model.predict(X[:, :1])
    with pytest.warns(ConvergenceWarning, match="increase max_iter"):
        RFFClassifier(max_iter=1, tol=0.0, random_state=0).fit(X, y)


@pytest.mark.parametrize("n_classes, alpha", [(2, 1e-3), (3, 1e-4)])
def test_a_float32_fit_converged_to_its_precision_does_not_warn(n_classes, alpha):
    # was: ConvergenceWarning "gradient 1.46e-06 > tol=1e-06" on these fits, where L-BFGS stalled on float32 rounding
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000 if n_classes == 2 else 500, 5))
    if n_classes == 2:
        y = (X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=X.shape[0]) > 0).astype(int)
    else:
        y = np.digitize(X[:, 0] + X[:, 1] ** 2, [0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model32 = RFFClassifier(alpha=alpha, random_state=0).fit(X.astype(np.float32), y)
        model64 = RFFClassifier(alpha=alpha, random_state=0).fit(X, y)
    assert model32.n_iter_ < model32.max_iter
    np.testing.assert_allclose(model32.predict_proba(X.astype(np.float32)), model64.predict_proba(X), atol=1e-3)
    for dtype in (np.float32, np.float64):  # a fit stopped by max_iter still warns
        with pytest.warns(ConvergenceWarning, match="stopped after 2 iterations"):
            RFFClassifier(alpha=alpha, max_iter=2, random_state=0).fit(X.astype(dtype), y)


@pytest.mark.parametrize("container", [sp.csr_matrix, sp.csc_matrix, sp.coo_matrix])
def test_a_sparse_x_is_made_dense_unless_the_feature_map_reads_sparse_input(container):
    # was: TypeError "Sparse data was passed for X, but dense data is required" from the default feature map
    X, y = make_problem()
    dense = RFFClassifier(random_state=0).fit(X, y)
    sparse = RFFClassifier(random_state=0).fit(container(X), y)
    np.testing.assert_array_equal(sparse.coef_, dense.coef_)
    np.testing.assert_array_equal(sparse.predict_proba(container(X)), dense.predict_proba(X))
    np.testing.assert_array_equal(sparse.predict(container(X)), dense.predict(X))
    # RBFSampler reads sparse X as it is: the same features up to rounding
    reads_sparse = dict(features=RBFSampler(n_components=30, random_state=1), tol=1e-9, max_iter=2000)
    on_sparse = RFFClassifier(**reads_sparse).fit(container(X), y)
    np.testing.assert_allclose(on_sparse.predict_proba(container(X)),
                               RFFClassifier(**reads_sparse).fit(X, y).predict_proba(X), atol=1e-8)


@pytest.mark.parametrize("streamed", [False, True])
def test_the_convergence_warning_points_at_the_line_that_called_fit(streamed):
    # was: logistic.py (in memory) and _classifier_stream.py (streamed)
    X, y = make_problem()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RFFClassifier(max_iter=2, random_state=0).fit(*((ArraySource(X, y), None) if streamed else (X, y)))
    caught = [w for w in caught if w.category is ConvergenceWarning]
    assert len(caught) == 1 and caught[0].filename == __file__


def test_a_warning_turned_into_an_error_fails_the_fit_and_leaves_the_old_state():
    """A fit's warnings are issued once it has succeeded; with warnings as errors the first one fails the
    fit, which then keeps the estimator as it was (it had been left fitted)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.where(X[:, 0] > 0, "a", "b")
    model = RFFClassifier(max_iter=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConvergenceWarning):
            model.fit(X, y)
    assert not hasattr(model, "classes_") and not hasattr(model, "coef_")
