"""One module per sandbox backend; `sandboxes.registry` chooses one by name."""
