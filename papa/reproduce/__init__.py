"""Batch reproduction: the section notebooks run by papermill and the grid of jobs behind them."""
