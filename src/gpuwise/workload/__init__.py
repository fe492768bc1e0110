"""Models (presets, config.json files, hub repos), exact parameter counts, and job descriptions."""
