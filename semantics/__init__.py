"""tilecert.semantics: the IR, the DSL capture frontend and the reference interpreter."""
