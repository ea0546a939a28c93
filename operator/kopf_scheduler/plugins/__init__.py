"""In-tree plugins, one subpackage each. Subpackages never import each other; shared helpers live in
``_helpers.py``."""
