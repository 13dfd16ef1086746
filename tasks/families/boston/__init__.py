"""Boston Housing regression: boston_housing."""
