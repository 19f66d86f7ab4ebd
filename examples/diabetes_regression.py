"""Diabetes progression: RFFNetRegressor and RFFRidge against a linear ridge reference.

scikit-learn's diabetes data (442 patients, 10 inputs, bundled: no download). RFFRidge is
kernel ridge regression on random Fourier features; RFFNetRegressor also learns one
relevance per input, so it ranks the inputs. On these 331 training rows its kernel model does
not beat ridge regression in cross-validation, so it keeps its linear-only model, which scores
as RidgeCV does, and its relevances are the sizes of the ridge weights.
Run: python examples/diabetes_regression.py
"""

import time

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from rffkit import RFFNetRegressor, RFFRidge
from rffkit.inspection import grouped_importances


def main():
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    models = {
        "RFFNetRegressor": RFFNetRegressor(random_state=0),
        "RFFRidge": make_pipeline(StandardScaler(), RFFRidge(random_state=0)),
        "RidgeCV (linear)": make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))),
    }
    scores = {}
    for name, model in models.items():
        start = time.perf_counter()
        model.fit(X_train, y_train)
        seconds = time.perf_counter() - start
        scores[name] = model.score(X_test, y_test)
        print(f"{name:18s} test R^2 {scores[name]:.3f}   fit {seconds:.2f} s")
    kept = "linear-only" if models["RFFNetRegressor"].linear_only_ else "kernel"
    print(f"RFFNet's share of the total relevance per input (its {kept} model):")
    print(grouped_importances(models["RFFNetRegressor"]).round(3).to_string())
    return scores


if __name__ == "__main__":
    main()
