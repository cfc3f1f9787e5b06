"""The ``mmc`` command and the one-machine deployment it runs (``mmc serve``).

It sits above both the API (``service``) and the workers (``worker``) because it composes
them: ``mmc serve`` supervises a Redis, workers and the API as child processes, ``mmc worker``
runs a worker, ``mmc openapi`` exports the app's document. Neither of them imports it.
"""
