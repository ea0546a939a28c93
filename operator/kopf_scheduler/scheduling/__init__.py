"""The scheduling core: the loop, one scheduling cycle and its binding cycle, the event handlers that
feed the queue and the cache, explanations and shadow verdicts."""
