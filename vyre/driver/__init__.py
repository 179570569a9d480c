"""Backend protocol, dispatch configuration, errors and the plugin registry."""
