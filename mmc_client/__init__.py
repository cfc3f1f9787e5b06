"""Python client of the mmc service.

    from mmc_client import Client
    result = Client("http://127.0.0.1:8000").cluster(X, "itersvr", random_state=0)
    print(result.labels, result.model_id, result.timing["fit_seconds"])

:class:`Client` blocks, :class:`AsyncClient` is its asyncio twin; both wait for jobs by long
polling and raise :class:`MMCError` (with the service's problem+json fields) on any error.
"""

from mmc_client._flows import Result
from mmc_client.client import AsyncClient, Client
from mmc_client.errors import JobFailedError, JobTimeoutError, MMCError
from mmc_client.statuses import FINAL_STATUSES, JobStatus

__all__ = ["FINAL_STATUSES", "AsyncClient", "Client", "JobFailedError", "JobStatus",
           "JobTimeoutError", "MMCError", "Result"]
