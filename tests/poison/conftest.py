"""The poison tier's hypothesis profiles, chosen with ``HYPOTHESIS_PROFILE``: ``ci`` (the default, what
``make test`` and ``make unit`` run: 200 examples per kind, derandomized so every run tries the same
objects) and ``fuzz`` (``make fuzz``: thousands per kind, random, so each run explores new ground). They
are registered by ``poison_strategies`` (the e2e tier draws from it too) and never loaded globally: other
tiers' hypothesis tests keep their own settings."""

import poison_strategies  # noqa: F401  (registers the profiles)
