"""The test suite (a package, so its helpers import as tests.helpers.* here and in the processes tests start)."""
