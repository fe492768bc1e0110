"""The web shell: FastAPI JSON API and server-rendered pages with bundled plotly charts (no CDN)."""
