"""Workshop rooms: the hub, a room's state, its store, codes, pages, and sync across replicas."""
