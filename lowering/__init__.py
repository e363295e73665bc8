"""tilecert.lowering (see ARCHITECTURE.md)."""
