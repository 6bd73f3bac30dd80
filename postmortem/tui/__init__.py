"""The Textual app over the core: dashboard first (the only module that imports textual)."""
