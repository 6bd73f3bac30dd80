"""The post-mortem document: the seven sections, rendered to Markdown, parsed back, linted."""
