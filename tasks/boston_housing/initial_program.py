"""Starter model for Boston Housing: ordinary least squares on the 13 raw features."""
import numpy as np
from sklearn.linear_model import LinearRegression


# EVOLVE-BLOCK-START
def run_model(X_train, y_train, X_test):
    """Train a regression model and predict the median house value MEDV (in thousands of dollars).

    Args:
        X_train (pd.DataFrame): (404, 13) training features, columns CRIM ... LSTAT.
        y_train (pd.Series): (404,) training targets MEDV.
        X_test (pd.DataFrame): (102, 13) features of the held-out houses.

    Returns:
        np.ndarray: (102,) predictions, one per row of X_test, in its order.
    """
    model = LinearRegression()
    model.fit(X_train, y_train)
    return np.asarray(model.predict(X_test))
# EVOLVE-BLOCK-END
