"""scikit-learn's estimator checks over the RFFNet estimators (no expected failures)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from rffkit import RFFNetClassifier, RFFNetRegressor

# Small, fast configurations: the checks fit dozens of times on tiny data.
FAST = dict(n_components=32, max_iter=30, random_state=0)


@parametrize_with_checks(
    [
        RFFNetRegressor(**FAST),
        RFFNetRegressor(**FAST, solver="adam"),
        RFFNetClassifier(**FAST),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
