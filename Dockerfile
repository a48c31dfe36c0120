# syntax=docker/dockerfile:1
# Stages: page (Node builds frontend/dist) -> wheel (the sdist and the wheel, carrying the page)
#   -> gpu (CUDA runtime base + the wheel + JAX 0.12 with its CUDA 13 plugin: a worker for a GPU host)
#   -> cpu (the default target: slim Python, bubblewrap, the wheel; `jaxplay serve` or `jaxplay worker`).
# No Node in either runtime image: the page ships inside the wheel.
# tests/packaging/test_installed_wheel.py runs the same steps outside Docker.

# Node 22 LTS: Vite 8 needs ^20.19 or >=22.12 (scripts/frontend-build enforces the same floor).
FROM node:22-bookworm-slim AS page
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

FROM python:3.11-slim-bookworm AS wheel
WORKDIR /src
RUN pip install --no-cache-dir "build>=1.2"
COPY pyproject.toml setup.py MANIFEST.in README.md CHANGELOG.md ./
COPY jaxplay/ jaxplay/
COPY server/ server/
COPY sandbox/ sandbox/
COPY --from=page /src/frontend/dist/ frontend/dist/
RUN python -m build --outdir /dist .

# The newest JAX, as a CPU host offers it: JAX 0.12 needs Python 3.12 or newer (Ubuntu 24.04's python3 is
# 3.12). Its cuda13 extra brings jax-cuda13-plugin with CUDA and cuDNN as pip wheels matched to jaxlib; the
# runtime base adds the CUDA compatibility libraries the NVIDIA container toolkit pairs with the host driver
# (CUDA 13 needs driver 580 or newer; on an older driver use "jax[cuda12]==0.12.0.1").
FROM nvidia/cuda:13.0.0-runtime-ubuntu24.04 AS gpu
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv bubblewrap util-linux \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/jaxplay
COPY --from=wheel /dist/ /tmp/dist/
RUN /opt/jaxplay/bin/pip install --no-cache-dir /tmp/dist/jaxplay-*.whl "jax[cuda13]==0.12.0.1" && rm -rf /tmp/dist
# The worker runs as root: it stages the sandbox's mounts, then drops to an unprivileged uid.
ENV PATH=/opt/jaxplay/bin:$PATH
CMD ["jaxplay", "worker", "--server", "ws://server:8001/worker"]

FROM python:3.11-slim-bookworm AS cpu
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap util-linux \
    && rm -rf /var/lib/apt/lists/*
# A venv of its own: the sandbox binds only the distributions runs need from it.
RUN python -m venv /opt/jaxplay
COPY --from=wheel /dist/ /tmp/dist/
RUN /opt/jaxplay/bin/pip install --no-cache-dir /tmp/dist/jaxplay-*.whl && rm -rf /tmp/dist
ENV PATH=/opt/jaxplay/bin:$PATH JAXPLAY_DATA_DIR=/data
VOLUME /data
EXPOSE 8000 8001
CMD ["jaxplay", "serve", "--host", "0.0.0.0", "--port", "8000"]
