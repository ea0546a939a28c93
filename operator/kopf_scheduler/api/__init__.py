"""The API layer: Kubernetes quantities and the SchedulingProfile model (defaults, merge rules,
validation). Pure functions over plain dicts; nothing here talks to a server.
"""
