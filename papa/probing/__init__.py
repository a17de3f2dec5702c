"""Probing a frozen (PAPA-modified) backbone: probe heads, feature caching, training and the λ head ranking."""
