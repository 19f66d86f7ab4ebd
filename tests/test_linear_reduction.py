"""RFFNet's linear-only heads (rffkit._heads.fit_linear), the reduction to them (reduce_to_linear) and its judge
(rffkit._kernel_or_linear)."""

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression, Ridge

from rffkit import RFFNetClassifier, RFFNetRegressor
from rffkit._heads import LogisticHeads, RidgeHeads, paired_gain, reduce_to_linear
from rffkit._streamed_heads import StreamedRidgeHeads, _Standardiser
from rffkit.io import ArraySource
from rffkit._kernel_or_linear import folds_of, judge_by_cross_validation
from rffkit.layers import ARDRandomFourierFeatures


def _layer(n_features, relevances, D=40, seed=0):
    layer = ARDRandomFourierFeatures.from_kernel(n_features, D, "gaussian", random_state=seed, dtype=torch.float64,
                                                 variant="cos_sin", linear=True)
    return layer.replace(relevances=torch.as_tensor(relevances, dtype=torch.float64)).requires_grad_(False)


def _linear_data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    logit = 1.5 * X[:, 0] - X[:, 1]
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    return torch.as_tensor(X), y


def test_logistic_linear_head_is_logistic_regression_on_the_inputs_of_nonzero_relevance():
    X, y = _linear_data()
    layer = _layer(4, [0.5, 2.0, 0.0, 0.1])  # feature 2 pruned
    alpha = 1e-3
    heads = LogisticHeads(X, y, None, None, 2, alphas=(alpha,), max_iter=1000, tol=1e-10, patience=2)
    head = heads.fit_linear(layer)
    assert head.coef.shape == (layer.width, 1)
    assert torch.all(head.coef[: layer.n_components] == 0) and head.coef[layer.n_components + 2] == 0
    kept = [0, 1, 3]
    reference = LogisticRegression(C=1.0 / (2.0 * alpha * X.shape[0]), tol=1e-12, max_iter=10_000)
    reference.fit(X[:, kept].numpy(), y)
    proba = torch.softmax(head.logits(layer(X)), dim=1)[:, 1].numpy()
    np.testing.assert_allclose(proba, reference.predict_proba(X[:, kept].numpy())[:, 1], atol=1e-6)
    # the weights on the layer's columns lambda o x are those of x divided by lambda
    np.testing.assert_allclose(head.coef[layer.n_components + torch.tensor(kept), 0].numpy() * [0.5, 2.0, 0.1],
                               reference.coef_[0], atol=1e-4)


def test_ridge_linear_head_is_ridge_on_the_inputs_with_its_penalty_chosen_on_validation():
    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.normal(size=(300, 3)))
    y = (X[:, :1] * 2.0 - X[:, 1:2] + 0.3 * torch.as_tensor(rng.normal(size=(300, 1))))
    layer = _layer(3, [1.0, 0.3, 0.7])
    alphas = (1e-4, 1e-2, 1.0)
    heads = RidgeHeads(X[:240], y[:240], X[240:], y[240:], alpha="auto", alphas=alphas)
    head = heads.fit_linear(layer)
    assert torch.all(head.coef[: layer.n_components] == 0)
    n = 240
    scores = {}
    for alpha in alphas:  # RFFNet's mean loss + alpha ||w||^2 is scikit-learn's Ridge at n alpha
        reference = Ridge(alpha=n * alpha).fit(X[:240].numpy(), y[:240, 0].numpy())
        scores[alpha] = np.mean((reference.predict(X[240:].numpy()) - y[240:, 0].numpy()) ** 2)
    best = min(scores, key=scores.get)
    assert head.alpha == best
    reference = Ridge(alpha=n * best).fit(X[:240].numpy(), y[:240, 0].numpy())
    np.testing.assert_allclose(head.predict(layer(X))[:, 0].numpy(), reference.predict(X.numpy()), atol=1e-6)


def test_float32_linear_head_on_the_indicators_of_a_category_does_not_drift():
    """The four indicators of a category sum to 1, as the intercept's column does: a direction the penalty
    alone fixes. Fitted in float32 the Gram matrix's rounding gave it an eigenvalue of 1e-7 of the largest,
    and at the penalty 1e-8 the four weights drifted to about 50 each while only one level matters (the
    relevances ranked the category first, by far). The head is fitted in float64, in memory and streamed:
    the weights are those of scikit-learn's Ridge in float64 at the same penalty."""
    rng = np.random.default_rng(0)
    n, level = 400, rng.integers(0, 4, 400)
    X = np.column_stack([np.eye(4)[level], rng.normal(size=n)])
    y = 4.0 * (level == 1) + X[:, 4] + 0.3 * rng.normal(size=n)
    mean, sd = X.mean(axis=0), X.std(axis=0)
    Xs = torch.as_tensor((X - mean) / sd, dtype=torch.float32)
    layer = _layer(5, [1.0] * 5).to(torch.float32)
    heads = RidgeHeads(Xs, torch.as_tensor(y[:, None], dtype=torch.float32), None, None, alpha=1e-8, alphas=(1e-8,))
    head = heads.fit_linear(layer)
    assert head.coef.dtype == torch.float32
    reference = Ridge(alpha=n * 1e-8).fit((X - mean) / sd, y)
    np.testing.assert_allclose(head.coef[layer.n_components:, 0].numpy(), reference.coef_, atol=1e-3)
    assert float(head.coef[layer.n_components:layer.n_components + 4].abs().max()) < 3.0
    # the streamed head (from sums over chunks of float32 inputs) is fitted in float64 too
    standardise = _Standardiser(mean, sd, 0.0, 1.0, torch.device("cpu"))
    streamed = StreamedRidgeHeads(ArraySource(X, y, chunk_rows=150), standardise, validated=False, fraction=0.0,
                                  seed=0, alphas=(1e-8,), owner="test").fit_linear(layer)
    np.testing.assert_allclose(streamed.coef[layer.n_components:, 0].numpy(), reference.coef_, atol=1e-3)


@pytest.mark.parametrize("kind", ["linear", "sine"])
def test_reduce_to_linear_keeps_the_kernel_only_where_it_wins_on_validation(kind):
    rng = np.random.default_rng(2)
    X = torch.as_tensor(rng.normal(size=(600, 2)))
    signal = X[:, 0] if kind == "linear" else torch.sin(3.0 * X[:, 0])
    y = (torch.as_tensor(rng.uniform(size=600)) < torch.sigmoid(4.0 * signal)).long().numpy()
    # a kernel too rough for a linear signal, well suited to the sine
    layer = _layer(2, [6.0, 0.0] if kind == "linear" else [3.0, 0.0], D=100).replace(linear=False)
    heads = LogisticHeads(X[:450], y[:450], X[450:], y[450:], 2, alphas=(1e-3,), max_iter=500, tol=1e-7,
                          patience=2)
    head = heads.fit(layer)
    new_layer, new_head, reduced = reduce_to_linear(heads, layer, head)
    assert reduced == (kind == "linear")
    if reduced:
        assert new_layer.has_linear and torch.all(new_head.coef[: new_layer.n_components] == 0)
        # the linear-only model, its relevances the weights of the standardised inputs
        linear = heads.fit_linear(layer.replace(linear=True))
        torch.testing.assert_close(new_head.logits(new_layer(X)), linear.logits(layer.replace(linear=True)(X)))
        reference = LogisticRegression(C=1.0 / (2.0 * 1e-3 * 450), tol=1e-12, max_iter=10_000)
        reference.fit(X[:450, :1].numpy(), y[:450])
        np.testing.assert_allclose(new_layer.relevances.detach().numpy(), [abs(reference.coef_[0, 0]), 0.0], rtol=1e-4)
    else:
        assert new_layer is layer and new_head is head
    # without a validation split nothing changes
    alone = LogisticHeads(X, y, None, None, 2, alphas=(1e-3,), max_iter=500, tol=1e-8, patience=2)
    assert reduce_to_linear(alone, layer, head) == (layer, head, False)


@pytest.mark.slow
def test_classifier_reduces_to_logistic_regression_on_linear_data_and_still_ranks_features():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 6))
    y = (rng.uniform(size=500) < 1.0 / (1.0 + np.exp(-(2.0 * X[:, 0] - 1.5 * X[:, 1])))).astype(int)
    model = RFFNetClassifier(random_state=0).fit(X, y)
    layer, weight = model.model_.rff, model.model_.first_linear.weight
    assert layer.has_linear and torch.all(weight[:, : layer.n_components] == 0) and model.linear_only_
    assert np.argsort(-model.feature_importances_)[0] == 0 and np.argsort(-model.feature_importances_)[1] == 1
    # 500 rows: judged by cross-validation, then logistic regression on all rows at the penalty chosen on them,
    # on the standardised inputs of non-zero relevance, whose weights' magnitudes are the relevances
    kept = np.flatnonzero(model.relevances_)
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    reference = LogisticRegression(C=1.0 / (2.0 * model.alpha_ * 500), tol=1e-10, max_iter=10_000)
    reference.fit(Xs[:, kept], y)
    np.testing.assert_allclose(model.relevances_[kept], np.abs(reference.coef_[0]), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(model.predict_proba(X)[:, 1], reference.predict_proba(Xs[:, kept])[:, 1], atol=1e-4)


def test_reduce_to_linear_follows_the_given_verdict_and_fits_the_linear_model_with_linear_heads():
    rng = np.random.default_rng(4)
    X = torch.as_tensor(rng.normal(size=(200, 3)))
    y = X[:, :1] - 0.5 * X[:, 1:2] + 0.2 * torch.as_tensor(rng.normal(size=(200, 1)))
    layer = _layer(3, [1.0, 0.5, 0.2])
    heads = RidgeHeads(X[:150], y[:150], X[150:], y[150:], alpha=1e-2, alphas=(1e-2,))
    head = heads.fit(layer)
    all_rows = RidgeHeads(X, y, None, None, alpha=1e-2, alphas=(1e-2,))
    assert reduce_to_linear(heads, layer, head, kernel_wins=True, linear_heads=all_rows) == (layer, head, False)
    # the verdict decides even where the validation split would keep the kernel
    new_layer, new_head, reduced = reduce_to_linear(heads, layer, head, kernel_wins=False, linear_heads=all_rows)
    assert reduced and torch.all(new_head.coef[: layer.n_components] == 0)
    reference = Ridge(alpha=200 * 1e-2).fit(X.numpy(), y[:, 0].numpy())  # on all 200 rows
    np.testing.assert_allclose(new_head.predict(new_layer(X))[:, 0].detach().numpy(), reference.predict(X.numpy()), atol=1e-6)


def _fold_reference_losses(X, y, folds, alpha):
    """Held-out squared error of each row under scikit-learn's Ridge on its fold's standardised training rows."""
    losses = np.empty_like(y)
    for train, test in folds:
        mean, scale = X[train].mean(axis=0), X[train].std(axis=0)
        model = Ridge(alpha=len(train) * alpha).fit((X[train] - mean) / scale, y[train])
        losses[test] = (model.predict((X[test] - mean) / scale) - y[test]) ** 2
    return losses


@pytest.mark.parametrize("kind", ["linear", "sine"])
def test_cross_validation_judges_the_kernel_and_the_linear_fits_on_held_out_rows(kind):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(240, 3))
    signal = X[:, 0] - 0.5 * X[:, 1] if kind == "linear" else np.sin(3.0 * X[:, 0])
    y = signal + 0.3 * rng.normal(size=240)
    y = (y - y.mean()) / y.std()
    estimator = RFFNetRegressor(random_state=0, prune_relevances=False, n_components=60, alpha=1e-3)
    folds = folds_of(torch.zeros(240, 1), 4, seed=0)
    assert sorted(np.concatenate([test for _, test in folds]).tolist()) == list(range(240))
    make_heads = lambda X, y: RidgeHeads(X, y, None, None, alpha=1e-2, alphas=(1e-2,))  # noqa: E731
    kernel, linear = judge_by_cross_validation(estimator, torch.as_tensor(X), torch.as_tensor(y[:, None]), make_heads,
                                               folds, seed=1)
    # the linear model of every fold is ridge on that fold's standardised training rows, scored on its held-out rows
    reference = _fold_reference_losses(X, y, folds, 1e-2)
    np.testing.assert_allclose(linear.numpy(), reference, rtol=1e-6, atol=1e-9)
    assert kernel.shape == (240,) and bool(torch.all(kernel >= 0))
    kernel_folds = np.array([float(kernel[test].mean()) for _, test in folds])
    linear_folds = np.array([float(linear[test].mean()) for _, test in folds])
    # on the sine the kernel model wins every fold; on the line (which its linear columns also fit) it loses on average
    assert np.all(kernel_folds < linear_folds) == (kind == "sine")
    assert (kernel.mean() > linear.mean()) == (kind == "linear")
    # the kernel model beats the linear one by more than one standard error of the paired differences only on the sine
    gain, threshold, _ = paired_gain(linear, kernel, 1.0)
    assert (gain > threshold) == (kind == "sine")


def test_cross_validation_scores_the_kernel_model_each_fold_would_keep():
    # each fold's kernel model is the estimator's own fit on the fold's rows, the head's refit on its training and
    # validation rows included (on small data it chooses the regressor's penalty by leave-one-out): a fold fit
    # without it judged a weaker model than the one the fit keeps, and reduced jtrain to its linear model
    import dataclasses

    from sklearn.base import clone

    from rffkit._validation import SEED_BOUND

    rng = np.random.default_rng(7)
    X = rng.normal(size=(150, 3))
    y = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.normal(size=150)
    estimator = RFFNetRegressor(random_state=0, n_components=40)
    folds = folds_of(torch.zeros(150, 1), 3, seed=0)
    make_heads = lambda X, y: RidgeHeads(X, y, None, None, alpha=1e-2, alphas=(1e-2,))  # noqa: E731
    kernel, _ = judge_by_cross_validation(estimator, torch.as_tensor(X), torch.as_tensor(y[:, None]), make_heads,
                                          folds, seed=1)
    seeds = np.random.default_rng(1)
    refit_changed = False
    for train, test in folds:
        seed = int(seeds.integers(SEED_BOUND))
        own = clone(estimator).set_params(random_state=seed)
        own._settings = dataclasses.replace(own._settings, reduce_linear=False)
        own.fit(X[train], y[train])
        np.testing.assert_allclose(kernel[test].numpy(), (own.predict(X[test]) - y[test]) ** 2, rtol=1e-5, atol=1e-7)
        unrefitted = clone(own)
        unrefitted._settings = dataclasses.replace(own._settings, refit_head=False)
        unrefitted.fit(X[train], y[train])
        refit_changed |= not np.allclose(unrefitted.predict(X[test]), own.predict(X[test]), rtol=1e-3)
    assert refit_changed  # the refit is not a no-op here, so this test tells the two fold fits apart


def test_small_regression_reduces_to_ridge_on_all_rows_when_the_kernel_does_not_beat_it_in_cross_validation():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(200, 4))
    y = 3.0 + 2.0 * X[:, 0] - X[:, 1] + rng.normal(size=200)
    model = RFFNetRegressor(random_state=0, prune_relevances=False, n_components=60).fit(X, y)
    layer, weight = model.model_.rff, model.model_.first_linear.weight
    assert layer.has_linear and torch.all(weight[:, : layer.n_components] == 0) and model.linear_only_
    # ridge on every row (training and validation), at the penalty it chose, in the target's standard units
    Xs, ys = (X - X.mean(axis=0)) / X.std(axis=0), (y - y.mean()) / y.std()
    reference = Ridge(alpha=200 * model.alpha_).fit(Xs, ys)
    # (the fit's inputs are float32)
    np.testing.assert_allclose(model.predict(X), reference.predict(Xs) * y.std() + y.mean(), rtol=1e-5, atol=1e-5)
    assert list(np.argsort(-model.feature_importances_)[:2]) == [0, 1]


@pytest.mark.parametrize("case", ["kernel ahead", "within a standard error", "one bad fold"])
def test_small_fit_keeps_the_kernel_model_only_when_its_held_out_losses_lead_by_a_standard_error(case, monkeypatch):
    import rffkit._kernel_or_linear as kernel_or_linear

    rng = np.random.default_rng(10)
    X = rng.normal(size=(200, 3))
    y = np.sin(3.0 * X[:, 0]) + 0.1 * rng.normal(size=200)

    def judged(estimator, X, target, make_heads, folds, *, seed):
        n = X.shape[0]
        linear = torch.ones(n, dtype=torch.float64) + 0.1 * torch.as_tensor(rng.normal(size=n))
        if case == "kernel ahead":  # 0.5 lower on every row
            kernel = linear - 0.5
        elif case == "within a standard error":  # lower on average by a tenth of a standard error
            noise = torch.as_tensor(rng.normal(size=n))
            kernel = linear + noise - noise.mean() - 0.1 * noise.std() / n**0.5
        else:  # lower on four folds of five, by 0.2; higher on the fifth by 1.5: worse in the mean
            test = folds[0][1]
            kernel = linear - 0.2
            kernel[test] = linear[test] + 1.5
        return kernel, linear

    monkeypatch.setattr(kernel_or_linear, "judge_by_cross_validation", judged)
    model = RFFNetRegressor(random_state=0, n_components=60).fit(X, y)
    assert model.linear_only_ == (case != "kernel ahead")


def test_linear_only_classifier_chooses_its_penalty_on_all_rows_above_the_leave_one_out_limit():
    # a cross-validated reduction on more rows than the kernel head's leave-one-out limit: the linear-only
    # head still chooses its penalty along the grid on the rows (it had taken the surrogate's penalty / 8)
    import dataclasses

    X, y = _linear_data(n=300, seed=3)
    model = RFFNetClassifier(random_state=0, n_components=60)
    model._settings = dataclasses.replace(model._settings, logistic_loo_rows=100, linear_cv_rows=1000)
    model.fit(X.numpy(), y)
    assert model.linear_only_
    grid = np.array(model._settings.logistic_alpha_grid)
    assert np.min(np.abs(np.log(grid / model.alpha_))) < 1e-9
