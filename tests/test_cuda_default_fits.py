"""The default in-memory fits on a CUDA GPU against the same fits on the CPU.

The other CUDA tests fit small configurations or the streamed path; these run what a user
gets from ``RFFNetRegressor(device="cuda").fit(X, y)``: the relevance search in float32,
the refinement moves screened in float32, the penalty path and the heads, all on torch's
CUDA kernels where the CPU fit calls LAPACK and BLAS directly. The float32 search follows
the order of its sums (as the thread count does on the CPU), so the models are compared by
what a user sees: the same relevant inputs first, and held-out errors within a few percent.
They skip without a GPU.
"""

import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss, roc_auc_score

from rffkit import RFFNetClassifier, RFFNetRegressor

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")


def test_default_regressor_on_cuda_fits_as_on_the_cpu():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5000, 12))
    y = np.sin(2.0 * X[:, 0]) + X[:, 1] ** 2 + X[:, 2] * X[:, 3] + 0.1 * rng.standard_normal(5000)
    (X, X_test), (y, y_test), support = np.split(X, [3000]), np.split(y, [3000]), [0, 1, 2, 3]
    cpu = RFFNetRegressor(random_state=0).fit(X, y)
    gpu = RFFNetRegressor(random_state=0, device="cuda").fit(X, y)
    assert gpu.n_components_ == cpu.n_components_
    for model in (cpu, gpu):
        assert set(np.argsort(-np.abs(model.relevances_))[:4]) == set(support)
    errors = [np.mean((model.predict(X_test) - y_test) ** 2) for model in (gpu, cpu)]
    assert errors[0] <= 1.05 * errors[1], errors
    # the fitted state holds NumPy arrays, so the model predicts on a machine without a GPU
    assert isinstance(gpu.relevances_, np.ndarray)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_default_classifier_on_cuda_fits_as_on_the_cpu(n_classes):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 8))
    score = np.sin(2.0 * X[:, 0]) + X[:, 1] ** 2 - 1.0 + 0.3 * rng.standard_normal(3000)
    labels = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    train, test = slice(0, 2000), slice(2000, None)
    cpu = RFFNetClassifier(random_state=0).fit(X[train], labels[train])
    gpu = RFFNetClassifier(random_state=0, device="cuda").fit(X[train], labels[train])
    assert list(gpu.classes_) == list(cpu.classes_)
    for model in (cpu, gpu):
        assert set(np.argsort(-model.feature_importances_)[:2]) == {0, 1}
    probabilities = [model.predict_proba(X[test]) for model in (gpu, cpu)]
    losses = [log_loss(labels[test], p, labels=cpu.classes_) for p in probabilities]
    assert losses[0] <= 1.03 * losses[1], losses
    areas = [roc_auc_score(labels[test], p[:, 1] if n_classes == 2 else p, multi_class="ovr") for p in probabilities]
    assert areas[0] >= areas[1] - 0.005, areas
