"""One adapter per attention mechanism (see `papa.method.adapters.base.Adapter`); the registry of model types is
`papa.method.architectures.ARCHITECTURES`."""
