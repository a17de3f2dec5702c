"""The method (paper 3): attaching PAPA to a model, constant matrices, the PAPA input layout, capture and extraction, attention-free fast paths, head selection."""
