"""tilecert.checker (see ARCHITECTURE.md)."""
