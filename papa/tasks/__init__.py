"""Tasks as data: the task registry, data readers, unlabeled corpora, metrics and MLM masking."""
