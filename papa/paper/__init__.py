"""What the paper's sections share: tables, grids, figures, pattern statistics, the paper's numbers and claims."""
