"""Side-by-side benchmark of kopf-scheduler, the upstream kube-scheduler and a raw binder (the API
server's ceiling), on workloads shaped like upstream scheduler_perf's, each run against a fresh
kube-apiserver and etcd. See ``bench/README.md``; run with ``python -m bench run --size small``.

``simulate_bench.py`` is the offline counterpart: the scheduling loop alone, without an API server.
"""
