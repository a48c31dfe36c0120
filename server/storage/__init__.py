"""Storage: the interface, its SQLite and PostgreSQL engines, and shared snippets."""
