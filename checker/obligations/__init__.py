"""One module per obligation kind; each states its formula in its docstring and returns a Verdict."""
