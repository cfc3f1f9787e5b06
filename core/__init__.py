"""What the API (``service``) and the workers (``worker``) share: settings, Redis records and
their key names, job records and their queues, webhooks, and the job metrics.

It imports neither of them (the workers' tasks are named by dotted string in
:mod:`core.queues`), so the two never need each other; it may import ``algorithms``.
"""
