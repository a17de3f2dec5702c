"""The bottom layer: errors, safe artifact files and the multi-process helpers every other layer uses."""
