"""Storage: the interface, its SQLite and PostgreSQL engines, and the factory that picks one; no HTTP."""
