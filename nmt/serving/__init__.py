"""Serving: `nmt serve`'s FastAPI app, the queue that decodes requests arriving together as one
batch, and the page (static/index.html)."""
