# One image for every Anneal process (docker-compose.yml picks the command). Build: docker build -t anneal .
# BASE: any Debian bookworm with python3.11. Where no registry can be pulled from, scripts/compose-up.sh builds
# one from Debian's packages (scripts/sandbox-image.sh platform-base) and passes it here.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

# bubblewrap and libseccomp2: the sandbox backend that runs verifier programs (used by the `sandbox` service).
# A base that has them already (the one built from Debian's packages) skips the download.
RUN if ! command -v bwrap >/dev/null || ! ldconfig -p | grep -q libseccomp.so.2; then \
        apt-get update \
        && apt-get install -y --no-install-recommends bubblewrap libseccomp2 \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# Python packages go to a virtual environment: the same on python's image and on Debian's own python3 (which
# is closed to pip, PEP 668).
RUN python3 -m venv /opt/venv
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app/platform:/app \
    DJANGO_SETTINGS_MODULE=anneal.settings \
    ANNEAL_DATA_DIR=/data

WORKDIR /app

# Dependencies first, so that a code change does not reinstall them.
# torch: PyPI's Linux wheel is the CUDA build (several GB; it also runs on CPU-only hosts). For a smaller
# CPU-only image: --build-arg PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu, whose 2.13.0+cpu
# satisfies the torch==2.13.0 pin. For a GPU host that serves with vLLM: --build-arg DEPS=gpu, which installs
# requirements/gpu.txt (torch 2.14.0 and vLLM) instead of pyproject.toml's set.
# Package index settings, unset unless given: scripts/compose-up.sh installs offline from wheels it made on
# the host (PIP_NO_INDEX=1, PIP_FIND_LINKS=/wheelhouse, mounted into the build).
ARG DEPS=base
ARG PIP_EXTRA_INDEX_URL=
ARG PIP_INDEX_URL
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ARG PIP_CERT
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
