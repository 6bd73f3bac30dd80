"""The screens of the TUI."""
