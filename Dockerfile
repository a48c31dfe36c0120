# One image for both roles: `jaxplay serve` and `jaxplay worker`.
FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap nodejs npm make util-linux \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /srv/jaxplay
COPY . .
RUN pip install --no-cache-dir -e . && cd frontend && npm ci --no-audit --no-fund && npm run build
EXPOSE 8000
CMD ["jaxplay", "serve", "--host", "0.0.0.0", "--port", "8000"]
