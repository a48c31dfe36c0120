"""The server: queues runs, routes them to workers, relays events, serves pages. Never imports JAX."""
