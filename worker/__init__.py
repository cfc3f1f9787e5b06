"""The RQ worker: the job and webhook tasks, the worker entry point, the sweeper.

It reads and writes job records through :mod:`core` and never imports the API.
"""
