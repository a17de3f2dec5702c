"""Runs and results: profiles, one experiment point, the results table and the names of run artifacts."""
