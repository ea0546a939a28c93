"""The scheduler's state: the scheduling queue and the cache of nodes and pods (with its snapshot).
``backend.queue`` and ``backend.cache`` do not know each other."""
