"""Errors that teach: hints, memory errors a person can act on, and the API index for the editor."""
