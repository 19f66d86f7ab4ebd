"""The refined retry does not repeat work whose result it already has (helper-47: on a 7,392-row table of
weak signal both runs fell back to the same searches at ``fallback_alpha`` and refined the same layer, 69 CPU s
for the model the first run alone gives in 34 s)."""

import numpy as np

import rffkit._search as search_module
import rffkit._search_refine as refine_module
from rffkit import RFFNetRegressor


def test_a_retry_that_falls_back_as_the_first_run_did_reuses_its_searches_and_moves(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2600, 4))
    y = 0.05 * X[:, 0] + rng.normal(size=2600)  # nearly no signal: every search falls back
    calls = []
    search = search_module.fit_variable_projection

    def counted(layer, *args, **kwargs):
        calls.append(kwargs["alpha"])
        return search(layer, *args, **kwargs)

    monkeypatch.setattr(search_module, "fit_variable_projection", counted)
    model = RFFNetRegressor(random_state=0, max_iter=20).fit(X, y)
    # the first run at 1e-4 and its two fallback searches at 1.0; the retry's own search at 1e-3, whose fallback
    # searches (same starts, same generator draws) are taken from the first run's
    assert calls == [1e-4, 1.0, 1.0, 1e-3]
    calls.clear()

    def forgetful(memo, inputs, generator, compute):
        return compute()

    monkeypatch.setattr(search_module, "remembered", forgetful)
    monkeypatch.setattr(refine_module, "remembered", forgetful)
    again = RFFNetRegressor(random_state=0, max_iter=20).fit(X, y)
    assert calls == [1e-4, 1.0, 1.0, 1e-3, 1.0, 1.0]
    np.testing.assert_array_equal(model.predict(X[:200]), again.predict(X[:200]))
    np.testing.assert_array_equal(model.relevances_, again.relevances_)
