"""The compile caches: their host folders, who may write them, and how a run sees them."""
