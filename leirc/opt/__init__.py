"""Optimization pipelines built from strategies (-O1; search in later issues)."""
