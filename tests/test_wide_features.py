"""The small-data choice of a wider D by cross-validation (rffkit._kernel_or_linear, settings.cv_wide_features)."""

import dataclasses

import numpy as np
import pytest
import torch
from sklearn.base import clone

import rffkit._kernel_or_linear as kernel_or_linear
from rffkit import RFFNetClassifier, RFFNetRegressor
from rffkit._heads import RidgeHeads
from rffkit._kernel_or_linear import folds_of, judge_by_cross_validation, wider_width
from rffkit._validation import SEED_BOUND
from rffkit.layers import ARDRandomFourierFeatures

WIDE = 300


def _sine(n=200, seed=10):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, np.sin(3.0 * X[:, 0]) + 0.1 * rng.normal(size=n)


def _with(model, **fields):
    model._settings = dataclasses.replace(model._settings, **fields)
    return model


def test_wider_width_for_the_classifier_where_its_default_is_narrower_and_left_to_the_fit():
    layer = ARDRandomFourierFeatures.from_kernel(3, 180, "gaussian")
    assert wider_width(RFFNetClassifier(), layer) == 2000  # the default settings
    assert wider_width(_with(RFFNetClassifier(), cv_wide_features=WIDE), layer) == WIDE
    assert wider_width(_with(RFFNetClassifier(), cv_wide_features=None), layer) is None
    assert wider_width(_with(RFFNetClassifier(), cv_wide_features=180), layer) is None  # not wider
    assert wider_width(_with(RFFNetClassifier(n_components=180), cv_wide_features=WIDE), layer) is None  # user's D
    assert wider_width(_with(RFFNetRegressor(), cv_wide_features=WIDE), layer) is None  # the regressor does not
    assert wider_width(RFFNetClassifier(), layer, streamed=True) is None  # nor a streamed fit's sample


def test_cross_validation_at_a_given_width_scores_the_estimators_fits_at_that_width():
    X, y = _sine(120)
    estimator = RFFNetRegressor(random_state=0, n_components=20)
    folds = folds_of(torch.zeros(120, 1), 3, seed=0)
    make_heads = lambda X, y: RidgeHeads(X, y, None, None, alpha=1e-2, alphas=(1e-2,))  # noqa: E731
    kernel, _ = judge_by_cross_validation(estimator, torch.as_tensor(X), torch.as_tensor(y[:, None]), make_heads,
                                          folds, seed=1, n_components=50)
    seeds = np.random.default_rng(1)  # the same seed, the same fold seeds
    for train, test in folds:
        own = clone(estimator).set_params(random_state=int(seeds.integers(SEED_BOUND)), n_components=50)
        own = _with(own, reduce_linear=False).fit(X[train], y[train])
        assert own.n_components_ == 50
        np.testing.assert_allclose(kernel[test].numpy(), (own.predict(X[test]) - y[test]) ** 2, rtol=1e-5, atol=1e-7)


def _judged(case, calls):
    """A stand-in for judge_by_cross_validation: losses by ``case``, the widths it was asked for in ``calls``."""
    rng = np.random.default_rng(3)

    def judged(estimator, X, target, make_heads, folds, *, seed, n_components=None):
        calls.append(n_components)
        n = X.shape[0]
        linear = torch.ones(n, dtype=torch.float64) + 0.1 * torch.as_tensor(rng.normal(size=n))
        if n_components is None:  # the default width: ahead of the linear model, unless that case
            return (linear + 0.5 if case == "linear ahead" else linear - 0.5), linear
        if case in ("within a standard error", "behind"):  # lower / higher than the default's on average
            noise = torch.as_tensor(rng.normal(size=n))
            sign = 1.0 if case == "behind" else -1.0
            return linear - 0.5 + noise - noise.mean() + sign * 0.1 * noise.std() / n**0.5, linear
        if case == "linear ahead":  # ahead of the default by 0.2 on every row, behind the linear model
            return linear + 0.3, linear
        return linear - 1.0, linear  # ahead of the default by 0.5 on every row

    return judged


@pytest.mark.parametrize("case, z, widened", [
    ("wide ahead", 0.0, True), ("within a standard error", 0.0, True), ("within a standard error", 1.0, False),
    ("behind", 0.0, False), ("linear ahead", 0.0, False)])
def test_small_classifier_widens_only_where_the_wide_folds_lead_by_z_standard_errors(case, z, widened, monkeypatch):
    X, y = _sine()
    calls = []
    monkeypatch.setattr(kernel_or_linear, "judge_by_cross_validation", _judged(case, calls))
    model = _with(RFFNetClassifier(random_state=0), cv_wide_features=WIDE, wide_over_default_z=z).fit(X, y > 0)
    assert calls == [None] + ([] if case == "linear ahead" else [WIDE])  # a reduced model is not widened
    assert model.n_components_ == (WIDE if widened else 180)  # 180 training rows: the default D
    assert model.linear_only_ == (case == "linear ahead")


def test_a_streamed_classifier_is_not_widened(monkeypatch):
    # its head's width is agreed before the search on its sample (helper-53: a widened search layer made the
    # streamed fit raise ValueError where the wide folds won)
    from rffkit.io import ArraySource

    X, y = _sine()
    calls = []
    monkeypatch.setattr(kernel_or_linear, "judge_by_cross_validation", _judged("wide ahead", calls))
    model = _with(RFFNetClassifier(random_state=0), cv_wide_features=WIDE).fit(ArraySource(X, (y > 0).astype(int)))
    assert calls == [None] and model.n_components_ != WIDE


@pytest.mark.parametrize("make", [RFFNetRegressor, RFFNetClassifier])
def test_widened_fit_is_the_fit_at_that_width(make, monkeypatch):
    # the fit the cross-validation chose is, to the bit, what the user gets by asking for that D
    X, y = _sine()
    if make is RFFNetClassifier:
        y = (y > 0).astype(int)
    monkeypatch.setattr(kernel_or_linear, "judge_by_cross_validation", _judged("wide ahead", []))
    widened = _with(make(random_state=0), cv_wide_features=WIDE)
    widened._widens_by_cross_validation = True  # the regressor's path too, where a subclass turns it on
    widened.fit(X, y)
    asked = _with(make(random_state=0, n_components=WIDE), reduce_linear=False).fit(X, y)
    assert widened.n_components_ == asked.n_components_ == WIDE
    np.testing.assert_array_equal(widened.relevances_, asked.relevances_)
    outputs = (lambda m: m.predict(X)) if make is RFFNetRegressor else (lambda m: m.predict_proba(X))
    np.testing.assert_array_equal(outputs(widened), outputs(asked))
