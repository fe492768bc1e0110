"""Turn results into rich tables, JSON-ready values and (later) Markdown and charts."""
