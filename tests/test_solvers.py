"""RFFNet's two solvers against naive references: Algorithm 1 and the variable-projection search."""

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from rffkit._adam import fit_alternating_adam
from rffkit.exceptions import DivergenceError
from rffkit._search import _Stage, fit_variable_projection, search_relevances
from rffkit._settings import DEFAULT_SETTINGS
from rffkit.layers import ARDRandomFourierFeatures, RFFNetModule


def _problem(n=300, p=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    return as_t(X), as_t(y[:, None])


def _network(p, n_components=40, seed=0):
    layer = ARDRandomFourierFeatures.from_kernel(p, n_components, random_state=seed, dtype=torch.float64)
    return RFFNetModule(layer, (), 1, torch.Generator().manual_seed(seed))


def _naive_algorithm_1(model, X, y, X_val, y_val, alpha, learning_rate, batch_size, epochs, seed):
    """Algorithm 1 written plainly: per batch one Adam step on (beta, c), then one on lambda."""
    relevances = model.rff.relevances
    head = [p for p in model.parameters() if p is not relevances]
    first, second = torch.optim.Adam(head, lr=learning_rate), torch.optim.Adam([relevances], lr=learning_rate)
    generator = torch.Generator().manual_seed(seed)
    best, best_state, curve = np.inf, None, []
    for _ in range(epochs):
        for rows in torch.randperm(X.shape[0], generator=generator).split(batch_size):
            for optimiser in (first, second):
                optimiser.zero_grad()
                loss = ((model(X[rows]) - y[rows]) ** 2).mean() + alpha * (model.first_linear.weight**2).sum()
                loss.backward()
                optimiser.step()
        with torch.no_grad():
            score = float(((model(X_val) - y_val) ** 2).mean())
        curve.append(score)
        if score < best:
            best, best_state = score, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    return curve


def test_alternating_adam_follows_the_naive_algorithm():
    X, y = _problem()
    X_val, y_val = _problem(100, seed=1)
    model = _network(4)
    reference = copy.deepcopy(model)
    history = fit_alternating_adam(
        model, nn.MSELoss(), X, y, X_val, y_val, alpha=1e-3, learning_rate=0.05, batch_size=64, max_iter=6,
        n_iter_no_change=None, tol=0.0, generator=torch.Generator().manual_seed(3),
        penalised=[model.first_linear.weight], relevances=model.rff.relevances,
    )
    curve = _naive_algorithm_1(reference, X, y, X_val, y_val, 1e-3, 0.05, 64, 6, seed=3)
    np.testing.assert_allclose(history.validation_loss, curve, rtol=1e-12)
    assert history.n_iter == 6 and history.best_validation_loss == min(curve)
    for name, tensor in model.state_dict().items():  # the best epoch's state is restored
        np.testing.assert_allclose(tensor.numpy(), reference.state_dict()[name].numpy(), rtol=1e-12, atol=1e-14)
    assert min(curve) < 0.5 * float(((y_val - y.mean()) ** 2).mean())


def test_alternating_adam_stops_early_and_reports_every_epoch():
    X, y = _problem()
    model = _network(4)
    seen = []
    history = fit_alternating_adam(
        model, nn.MSELoss(), X, y, None, None, alpha=1e-3, learning_rate=1e-9, batch_size=64, max_iter=50,
        n_iter_no_change=3, tol=0.1, generator=torch.Generator().manual_seed(0),
        penalised=[model.first_linear.weight], relevances=model.rff.relevances,
        progress=lambda epoch, train, score: seen.append(epoch),
    )
    # a step of 1e-9 never improves the training loss by 10%: 1 epoch, then 3 without progress
    assert history.n_iter == 4 and seen == [1, 2, 3, 4]


def test_alternating_adam_gives_up_on_a_loss_that_stays_non_finite():
    X, y = _problem(60)
    model = _network(4)
    with pytest.raises(DivergenceError, match="lower learning_rate"):
        fit_alternating_adam(
            model, lambda out, target: (out - target).pow(2).mean() * torch.tensor(float("nan")), X, y, None, None,
            alpha=0.0, learning_rate=0.1, batch_size=30, max_iter=5, n_iter_no_change=None, tol=0.0,
            generator=torch.Generator().manual_seed(0), penalised=[model.first_linear.weight],
            relevances=model.rff.relevances,
        )


def _naive_validation_mse(layer, relevances, s, X, y, X_val, y_val, alpha):
    """Ridge on the first s features at ``relevances``, by numpy's solver; its validation MSE."""
    probe = layer.replace(relevances=torch.as_tensor(relevances, dtype=torch.float64))
    with torch.no_grad():
        Z, Zv = probe(X, s).numpy(), probe(X_val, s).numpy()
    z_mean, y_mean = Z.mean(axis=0), y.numpy().mean(axis=0)
    Zc, yc = Z - z_mean, y.numpy() - y_mean
    beta = np.linalg.solve(Zc.T @ Zc / len(Z) + alpha * np.eye(s), Zc.T @ yc / len(Z))
    return float(np.mean((Zv @ beta + y_mean - z_mean @ beta - y_val.numpy()) ** 2))


def _naive_gcv(layer, relevances, s, X, y, alpha):
    probe = layer.replace(relevances=torch.as_tensor(relevances, dtype=torch.float64))
    with torch.no_grad():
        Z = probe(X, s).numpy()
    m = len(Z)
    Zc, yc = Z - Z.mean(axis=0), y.numpy() - y.numpy().mean(axis=0)
    hat = Zc @ np.linalg.solve(Zc.T @ Zc / m + alpha * np.eye(s), Zc.T / m)
    return float(np.mean((yc - hat @ yc) ** 2) / (1 - np.trace(hat) / m) ** 2)


def test_search_objective_gradient_matches_finite_differences_of_the_naive_gcv():
    X, y = _problem(200)
    layer = ARDRandomFourierFeatures.from_kernel(4, 30, random_state=0, dtype=torch.float64)
    stage = _Stage(layer, X, y, None, None, 30, alpha=1e-3, relevance_penalty=0.0, tol=0.0, n_iter_no_change=None,
                   history=None, progress=None)
    point = np.array([0.7, 0.4, 0.2, 0.1])
    value, gradient = stage.objective(point)
    assert value == pytest.approx(_naive_gcv(layer, point, 30, X, y, 1e-3), rel=1e-10)
    step = 1e-6
    for j in range(4):
        up, down = point.copy(), point.copy()
        up[j] += step
        down[j] -= step
        numeric = (_naive_gcv(layer, up, 30, X, y, 1e-3) - _naive_gcv(layer, down, 30, X, y, 1e-3)) / (2 * step)
        assert gradient[j] == pytest.approx(numeric, rel=1e-5, abs=1e-9)


def test_variable_projection_keeps_the_best_validated_iterate():
    X, y = _problem(600)
    X_val, y_val = _problem(200, seed=1)
    layer = ARDRandomFourierFeatures.from_kernel(4, 60, random_state=0, dtype=torch.float64)
    start = layer.relevances.detach().clone().numpy()
    history = fit_variable_projection(
        layer, X, y, X_val, y_val, alpha=1e-3, max_iter=30, n_iter_no_change=5, tol=1e-4,
        generator=torch.Generator().manual_seed(0),
    )
    s = min(60, int(np.floor(np.sqrt(600) * np.log(600))))  # one stage of s features on all 600 rows
    found = layer.relevances.detach().numpy()
    assert history.best_validation_loss == min(history.validation_loss)
    assert _naive_validation_mse(layer, found, s, X, y, X_val, y_val, 1e-3) == pytest.approx(
        history.best_validation_loss, rel=1e-8
    )
    # the search learned something: x0 and x1 carry the signal, x2 and x3 none
    assert _naive_validation_mse(layer, found, s, X, y, X_val, y_val, 1e-3) < 0.7 * _naive_validation_mse(
        layer, start, s, X, y, X_val, y_val, 1e-3
    )
    assert min(abs(found[0]), abs(found[1])) > max(abs(found[2]), abs(found[3]))


def test_search_relevances_retries_on_a_small_split_and_keeps_the_best_head():
    X, y = _problem(400)
    X_val, y_val = _problem(100, seed=1)
    settings = replace(DEFAULT_SETTINGS, small_sample_alphas=(1e-2, 1.0))
    layer = ARDRandomFourierFeatures.from_kernel(4, 40, random_state=0, dtype=torch.float64)
    labels = set()
    result = search_relevances(
        layer, X, y, X_val, y_val, alpha=1e-4, auto_alpha=True, max_iter=10, n_iter_no_change=5, tol=1e-4,
        generator=torch.Generator().manual_seed(0), settings=settings,
        progress=lambda search, *values: labels.add(search),
    )
    assert labels == {"alpha=0.0001", "alpha=0.01, uniform start", "alpha=0.01, marginal start",
                      "alpha=1, uniform start", "alpha=1, marginal start"}
    assert result.alpha in (1e-4, 1e-2, 1.0)
    assert torch.equal(layer.relevances.detach(), result.relevances)
    with torch.no_grad():  # the head is the ridge fit at the kept relevances, scored on validation
        residual = layer(X_val) @ result.head.coef + result.head.intercept - y_val
    assert float((residual**2).mean()) == pytest.approx(result.head.score, rel=1e-10)


def test_varpro_width_is_wider_for_a_few_thousand_rows():
    from rffkit._search import default_n_components, varpro_n_components

    # the small path keeps min(n, 1000); a few thousand rows get up to n / 2 within the head budget
    assert [varpro_n_components(n) for n in (100, 1800, 2070, 4500, 9000)] == [100, 1000, 1035, 2250, 1825]
    for n in (33750, 45000, 200000):  # at scale the rule of Li et al. (2018) decides
        assert varpro_n_components(n) == default_n_components(n)
    narrow = replace(DEFAULT_SETTINGS, varpro_wide_features=0)
    assert varpro_n_components(4500, narrow) == 1000


def test_a_small_regressors_head_on_all_rows_takes_the_leave_one_out_penalty():
    """On at most ridge_loo_rows rows the head refitted on the training and validation rows takes the
    penalty of least exact leave-one-out error on them (loo_ridge_head of the fitted layer's features),
    not the 20-row validation split's; with ridge_loo_rows=0 the layer is the same and the penalty is
    the split's (coefficients to 1e-4 of their largest)."""
    from rffkit import RFFNetRegressor
    from rffkit._ridge import loo_ridge_head

    rng = np.random.default_rng(6)  # the split takes 3e-7, leave-one-out 1e-4
    X = rng.normal(size=(200, 3))
    y = np.sin(2 * X[:, 0]) * X[:, 1] + 0.3 * rng.normal(size=200)
    model = RFFNetRegressor(random_state=0).fit(X, y)
    split = RFFNetRegressor(random_state=0)
    split._settings = replace(DEFAULT_SETTINGS, ridge_loo_rows=0)
    split.fit(X, y)
    np.testing.assert_array_equal(model.relevances_, split.relevances_)
    Xs = torch.as_tensor(model._standardise(X), dtype=torch.float32)
    with torch.no_grad():
        Z = model.model_.rff(Xs)
    target = torch.as_tensor((y - model._y_mean) / model._y_scale, dtype=torch.float32)
    head = loo_ridge_head(Z, target, DEFAULT_SETTINGS.alpha_grid, Xs)
    assert model.alpha_ == head.alpha != split.alpha_
    weight = model.model_.first_linear.weight.detach()[0]
    assert float((weight - head.coef).abs().max()) <= 1e-4 * float(head.coef.abs().max())
