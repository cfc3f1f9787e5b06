"""The HTTP API (FastAPI): routes, request and response schemas, authentication, the console.

It enqueues jobs through :mod:`core` and never imports the worker.
"""
