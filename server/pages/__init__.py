"""HTML pages: the editor and the editor's API index data (a link's pages: server/sharing/)."""
