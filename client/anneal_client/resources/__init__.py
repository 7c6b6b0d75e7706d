"""One module per kind of thing the API serves; each has a sync and an async class over shared plans."""
