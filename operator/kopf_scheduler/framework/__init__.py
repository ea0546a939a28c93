"""The plugin contract: extension-point interfaces, Status, CycleState, PodInfo, NodeInfo, Handle.

Nothing here talks to the API server or imports Kopf; the scheduling core is testable on plain dicts.
"""
