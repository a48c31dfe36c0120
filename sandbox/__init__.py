"""The worker side: a worker agent that dials the server, and the sandbox it runs user code in."""
