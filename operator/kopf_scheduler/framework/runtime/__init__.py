"""Builds a profile into a running framework: the registry, the framework runtime, waiting pods."""
