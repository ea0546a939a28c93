"""``kopf-scheduler simulate``: the real scheduling loop over an in-memory cluster read from YAML."""
