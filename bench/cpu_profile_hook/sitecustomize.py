"""Run by Python at the start of every process that has this folder on its PYTHONPATH: the benchmark puts
it there for kopf-scheduler when profiling CPU (``python -m bench run --profile --profile-format cpu``), so
that the scheduling process and the watch intake process it starts both load ``bench/cpu_sampler.py``.
Nothing happens unless ``BENCH_CPU_PROFILE`` is set."""

import os

if os.environ.get("BENCH_CPU_PROFILE"):
    import importlib.util
    from pathlib import Path

    _spec = importlib.util.spec_from_file_location(
        "_bench_cpu_sampler", Path(__file__).resolve().parent.parent / "cpu_sampler.py"
    )
    if _spec is not None and _spec.loader is not None:
        _module = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_module)
        _module.start_from_env()
