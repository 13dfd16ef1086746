"""Kissing configurations, checked exactly: kissing_number_11."""
