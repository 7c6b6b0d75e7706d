# One image for every Anneal process (docker-compose.yml picks the command). Build: docker build -t anneal .
FROM python:3.11-slim-bookworm

# bubblewrap: the sandbox backend that runs verifier programs (used by the `sandbox` service).
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app/platform:/app \
    DJANGO_SETTINGS_MODULE=anneal.settings \
    ANNEAL_DATA_DIR=/data

WORKDIR /app

# Dependencies first, so that a code change does not reinstall them.
# torch: PyPI's Linux wheel is the CUDA build (several GB; it also runs on CPU-only hosts). For a smaller
# CPU-only image: --build-arg PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu, whose 2.13.0+cpu
# satisfies the torch==2.13.0 pin. For a GPU host that serves with vLLM: --build-arg DEPS=gpu, which installs
# requirements/gpu.txt (torch 2.14.0 and vLLM) instead of pyproject.toml's set.
ARG DEPS=base
ARG PIP_EXTRA_INDEX_URL=
COPY pyproject.toml README.md ./
COPY requirements/ requirements/
RUN if [ "$DEPS" = gpu ]; then pip install -r requirements/gpu.txt; else pip install .; fi

# The code stays owned by root: the processes run as `anneal` and can write only to /data.
COPY . .
RUN useradd --create-home --uid 10001 anneal \
    && mkdir -p /data \
    && chown anneal:anneal /data
USER anneal
VOLUME ["/data"]
EXPOSE 8000

CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "anneal.asgi:application"]
