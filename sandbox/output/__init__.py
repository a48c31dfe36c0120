"""A run's bytes on their way out: events, the ordered stdout/stderr pipes, and the worker's relay."""
