"""The method (paper 3): attaching PAPA to a model, constant matrices, the input layout, extraction, head selection."""
