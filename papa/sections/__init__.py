"""The paper's sections, one module per section notebook: what it runs, its tables and figures, and its claims."""
