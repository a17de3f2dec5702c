"""Tasks as data: the task registry, readers of the original data formats, unlabeled corpora, metrics and MLM masking."""
