"""tilecert.backends (see ARCHITECTURE.md)."""
