"""The paper's sections and figures: section computations, pattern statistics, inspection and the explorer."""
