"""Float32 inputs with a target far from zero: the fit centres the target in float64 (helper-43's finding:
SRFFRegressor's test R^2 fell from 0.96 to 0.86 at y + 1e4 and to -296 at y + 1e8), and where float32
predictions cannot resolve the target the fit says so."""

import warnings

import numpy as np
import pytest
from sklearn.metrics import r2_score

from rffkit import RFFRidge, SRFFRegressor


def _data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 + 0.1 * rng.normal(size=n)


@pytest.mark.parametrize("make", [lambda: SRFFRegressor(n_components=50, alphas=8, random_state=0),
                                  lambda: RFFRidge(n_components=100, random_state=0)], ids=["srff", "ridge"])
def test_an_offset_target_fits_as_well_in_float32(make):
    """At y + 1e4 the float32 fit scores as the float64 fit of y does, to 0.005 R^2 (measured: 0.955 and
    0.955 for SRFF, 0.706 and 0.706 for RFFRidge)."""
    X, y = _data(200, 0)
    X_test, y_test = _data(200, 1)
    reference = r2_score(y_test, make().fit(X, y).predict(X_test))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at this offset
        model = make().fit(X.astype(np.float32), y + 1e4)
    shifted = r2_score(y_test, model.predict(X_test.astype(np.float32)).astype(np.float64) - 1e4)
    assert shifted == pytest.approx(reference, abs=5e-3)


@pytest.mark.parametrize("make", [lambda: SRFFRegressor(n_components=20, alphas=2, random_state=0),
                                  lambda: RFFRidge(n_components=20, random_state=0)], ids=["srff", "ridge"])
def test_a_target_float32_cannot_resolve_is_named(make):
    X, y = _data(100, 0)
    with pytest.warns(RuntimeWarning, match="float32"):
        make().fit(X.astype(np.float32), y + 1e8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        make().fit(X, y + 1e8)  # float64 predictions resolve it


@pytest.mark.parametrize("selection", ["gcv", "holdout"])
def test_a_streamed_fit_names_a_target_float32_cannot_resolve(selection):
    """A streamed RFFRidge (an ArraySource, or holdout selection on arrays) keeps no y, only its sums:
    it warns from the targets' moments, as the fit in memory does from y."""
    from rffkit.io import ArraySource

    X, y = _data(300, 0)
    X32 = X.astype(np.float32)
    with pytest.warns(RuntimeWarning, match="float32"):
        RFFRidge(n_components=20, random_state=0, alpha_selection=selection).fit(ArraySource(X32, y + 1e8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        RFFRidge(n_components=20, random_state=0, alpha_selection=selection).fit(ArraySource(X32, y + 1e4))
        RFFRidge(n_components=20, random_state=0, alpha_selection=selection).fit(ArraySource(X, y + 1e8))


@pytest.mark.parametrize("scale", [1e-301, 1.0, 1e300])
def test_the_offset_warning_depends_on_the_ratio_of_mean_to_spread_not_on_the_scale(scale):
    """y of mean 0.3 and spread about 0.5 (times ``scale``) draws no warning at any scale, and a mean of
    1e8 times its spread (times ``scale``) does. At 1e-301 the squared deviations had underflowed to a
    spread of 0, and the first warned (hypothesis found it through SRFFRegressor)."""
    from rffkit._validation import warn_if_float32_offset

    near = np.array([0.1379, -0.1449, 0.6616, 0.5]) * scale
    far = (1e8 + np.array([0.1, -0.1, 0.0, 0.05])) * scale
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_if_float32_offset("Model", near, np.float32)
    assert not caught
    with pytest.warns(RuntimeWarning, match="times its spread"):
        warn_if_float32_offset("Model", far, np.float32)
