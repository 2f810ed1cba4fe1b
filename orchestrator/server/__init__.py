"""The process of `jarvis run`: the FastAPI app, its security checks, request limits, uploads, and the background services."""
