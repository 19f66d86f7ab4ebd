"""Breast-cancer diagnosis: RFFClassifier and RFFNetClassifier.

scikit-learn's breast-cancer data (569 tumours, 30 inputs, bundled). RFFClassifier is
logistic regression on random Fourier features; RFFNetClassifier learns a relevance per
input as well (here with a short training run, max_iter=50). On this split it keeps its
linear-only model (logistic regression on the inputs), which cross-validates as well as its
kernel model: its relevances are then the sizes of the logistic weights.
Run: python examples/breast_cancer_classification.py
"""

import time

from sklearn.datasets import load_breast_cancer
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from rffkit import RFFClassifier, RFFNetClassifier
from rffkit.inspection import grouped_importances


def main():
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    models = {
        "RFFClassifier": make_pipeline(StandardScaler(), RFFClassifier(random_state=0)),
        "RFFNetClassifier": RFFNetClassifier(max_iter=50, random_state=0),
    }
    accuracy = {}
    for name, model in models.items():
        start = time.perf_counter()
        model.fit(X_train, y_train)
        seconds = time.perf_counter() - start
        accuracy[name] = model.score(X_test, y_test)
        auc = roc_auc_score(y_test, model.predict_proba(X_test)[:, 1])
        print(f"{name:17s} accuracy {accuracy[name]:.3f}   ROC AUC {auc:.3f}   fit {seconds:.2f} s")
    kept = "linear-only" if models["RFFNetClassifier"].linear_only_ else "kernel"
    print(f"RFFNet's five most relevant inputs (share of the total relevance; its {kept} model):")
    print(grouped_importances(models["RFFNetClassifier"]).head(5).round(3).to_string())
    return accuracy


if __name__ == "__main__":
    main()
