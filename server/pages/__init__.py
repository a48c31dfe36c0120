"""HTML pages: the editor, shared snippets, and the editor's API index data."""
