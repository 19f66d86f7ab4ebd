"""A pipeline with categorical columns: which of the table's columns does RFFNet use?

The diabetes data (bundled with scikit-learn) in original units, with two columns turned
into labels: ``sex`` (coded 1 or 2 in the data) and ``age`` binned into decades. A
ColumnTransformer one-hot encodes the labels and standardises the numbers, so RFFNet sees
one column per label; grouped_importances combines their shares per table column (by
their norm for RFFNet: the weight of the column in the kernel's distance, or, when RFFNet
keeps its linear-only model as it does on these 331 rows, the size of its weights).
Run: python examples/categorical_pipeline.py [--plot docs/relevances.png]
"""

import argparse

import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from rffkit import RFFNetRegressor
from rffkit.inspection import grouped_importances, plot_relevances


def main(plot=None):
    X, y = load_diabetes(return_X_y=True, as_frame=True, scaled=False)
    X["sex"] = X["sex"].map({1.0: "group 1", 2.0: "group 2"})
    X["age"] = pd.cut(X["age"], bins=[0, 30, 40, 50, 60, 100], labels=["<30", "30s", "40s", "50s", "60+"]).astype(str)
    categorical, numeric = ["sex", "age"], [c for c in X.columns if c not in ("sex", "age")]
    preprocessing = ColumnTransformer(
        [("labels", OneHotEncoder(handle_unknown="ignore"), categorical), ("numbers", StandardScaler(), numeric)]
    )
    model = Pipeline([("prep", preprocessing), ("rffnet", RFFNetRegressor(random_state=0))])
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    model.fit(X_train, y_train)
    print(f"test R^2 {model.score(X_test, y_test):.3f}; RFFNet saw {model[-1].n_features_in_} columns "
          f"made from the table's {X.shape[1]}; linear-only model: {model[-1].linear_only_}")
    norms = grouped_importances(model)  # largest first; 'norm' for RFFNet
    grouped = pd.DataFrame({how: grouped_importances(model, aggregate=how)[norms.index] for how in ("norm", "sum", "max")})
    print("relevance per table column (norm, sum and max of the shares of its one-hot columns):")
    print(grouped.round(3).to_string())
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        ax = plot_relevances(model)
        ax.set_title("RFFNet on diabetes: relevance per column (one-hot columns: norm)", fontsize=9)
        ax.figure.tight_layout()
        ax.figure.savefig(plot, dpi=110)
        print(f"bar chart saved to {plot}")
    return grouped


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", help="save the bar chart of the grouped relevances to this PNG file")
    main(parser.parse_args().plot)
