"""``bench/RESULTS.md`` and its chart, generated from every ``results/*.json``.

For each (mode, workload, size, scheduler) the newest results file that has it wins; when that file
holds several repeats, the table shows the median of the complete ones. A run that did not bind every
pod is shown as INCOMPLETE with how many were bound, never averaged in. Runs with a profiler attached
(``--profile``) or a controller manager beside the scheduler (``--with-controller-manager``) are left out.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.schedulers import ALL, KOPF_SCHEDULER, KUBE_SCHEDULER, RAW_BINDER
from bench.workloads import MIXED_CHURN, SIZES, WORKLOADS

#: the workloads whose burst p99 latency is held against kube-scheduler's
BURST_LATENCY = ("SchedulingBasic", "SchedulingNodeAffinity")
MEMORY_AT_SCALE = "MemoryAtScale"
PREEMPTION = "PreemptionBasic"
#: a workload whose pods are created at a fixed pace meets its throughput target at this fraction of the
#: pace: a scheduler that keeps up binds each second's pods in that second or the next, so its sampled
#: average differs from the pace, and from another scheduler that keeps up, by a fraction of a pod a
#: second (99.9 to 100.1 pods/s at 100 in recorded runs of both schedulers)
PACE_TOLERANCE = 0.01

CHART = "throughput.png"
COST_CURVE = "cost_curve.png"
#: the workload whose sizes make the cost curve
CURVE_WORKLOAD = "SchedulingBasic"
NUMERIC = (
    "throughput_avg", "throughput_p50", "throughput_p90", "throughput_p99", "throughput_overall",
    "latency_p50_s", "latency_p90_s", "latency_p99_s", "cpu_seconds", "cpu_ms_per_pod", "peak_rss_bytes",
    "api_requests_per_pod", "api_writes_per_pod", "api_writes_per_pod_without_events",
    "api_event_writes_per_pod", "startup_seconds", "foreign_cpu_seconds", "apiserver_cpu_seconds",
    "measured_seconds",
    # python -m bench failover
    "first_binding_seconds", "pending_bound_seconds", "standby_ready_seconds", "lease_taken_seconds",
    "failover_seconds", "latency_max_s", "probe_created_seconds", "probe_bound_after_seconds",
)  # fmt: skip


def load(results_dir: Path) -> tuple[dict[tuple[str, str, str, str], dict[str, Any]], list[dict[str, Any]]]:
    """The row per (mode, workload, size, scheduler) and the documents it came from (oldest first)."""
    documents = []
    for path in sorted(results_dir.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("runs"), list):
            doc["_file"] = path.name
            documents.append(doc)
    rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for doc in documents:  # later files replace earlier ones
        grouped: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for run in doc["runs"]:
            if run.get("profile") or run.get("controller_manager"):
                continue  # a profiler or another API client was attached: not comparable
            mode = run.get("mode", "throughput")
            if mode == "latency":
                mode = f"latency@{run.get('rate', 0):g}"
            grouped[(mode, run["workload"], run["size"], run["scheduler"])].append(run)
        for key, runs in grouped.items():
            rows[key] = combine(runs, doc)
    return rows, documents


def combine(runs: list[dict[str, Any]], doc: dict[str, Any]) -> dict[str, Any]:
    complete = [r for r in runs if r.get("complete")]
    base = dict(complete[-1] if complete else runs[-1])
    base["repeats"] = len(runs)
    base["complete_repeats"] = len(complete)
    base["file"] = doc["_file"]
    base["load"] = max((r.get("loadavg_before") or [0])[0] for r in runs)
    if len(complete) > 1:
        for field in NUMERIC:
            values = [r[field] for r in complete if r.get(field) is not None]
            if values:
                base[field] = statistics.median(values)
    return base


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _avg(row: dict[str, Any]) -> str:
    """The sampled average, or (marked *) the overall rate of a run too short to give a sample."""
    if row.get("throughput_avg") is not None:
        return _num(row["throughput_avg"])
    if row.get("throughput_overall") is not None:
        return _num(row["throughput_overall"]) + "*"
    return "-"


def throughput(row: dict[str, Any] | None) -> float | None:
    if not row or not row.get("complete"):
        return None
    value = row.get("throughput_avg")
    return value if value is not None else row.get("throughput_overall")


def _status(row: dict[str, Any]) -> str:
    if row.get("complete"):
        return "ok" if row["repeats"] == 1 else f"ok x{row['complete_repeats']}"
    return f"INCOMPLETE ({row.get('bound', 0)}/{row.get('pods')} bound)"


def _ratio(a: Any, b: Any) -> str:
    if not a or not b:
        return "-"
    return f"{a / b:.2f}x"


def throughput_table(rows: dict[tuple[str, str, str, str], dict[str, Any]], size: str) -> list[str]:
    lines = [
        "| workload | nodes / init / measured | scheduler | throughput avg | p50 | p90 | p99 (pods/s) "
        "| latency p50 | p99 (s) | CPU s | CPU ms/pod | peak RSS MiB | API req/pod | writes/pod (events) "
        "| other CPU s | status |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for name in WORKLOADS:
        for kind in ALL:
            row = rows.get(("throughput", name, size, kind))
            if row is None:
                continue
            writes = row.get("api_writes_per_pod_without_events")
            events = row.get("api_event_writes_per_pod")
            mark = " †" if WORKLOADS[name].controllers else ""
            lines.append(
                f"| {name}{mark} | {row['nodes']:,} / {row['init_pods']:,} / {row['pods']:,} | {kind} "
                f"| {_avg(row)} | {_num(row.get('throughput_p50'))} "
                f"| {_num(row.get('throughput_p90'))} | {_num(row.get('throughput_p99'))} "
                f"| {_num(row.get('latency_p50_s'), 2)} | {_num(row.get('latency_p99_s'), 2)} "
                f"| {_num(row.get('cpu_seconds'), 1)} | {_num(row.get('cpu_ms_per_pod'), 2)} "
                f"| {_num((row.get('peak_rss_bytes') or 0) / 2**20)} "
                f"| {_num(row.get('api_requests_per_pod'), 2)} | {_num(writes, 2)} ({_num(events, 2)}) "
                f"| {_num(row.get('foreign_cpu_seconds'), 0)} | {_status(row)} |"
            )
    return lines


def comparison_table(rows: dict[tuple[str, str, str, str], dict[str, Any]], size: str) -> list[str]:
    lines = [
        "| workload | kopf / kube throughput | kopf / raw-binder ceiling | kube / ceiling "
        "| kopf / kube p99 latency | kopf / kube peak RSS | kopf / kube CPU s | CPU ms/pod kopf / kube |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    found = False
    for name in WORKLOADS:
        kopf = rows.get(("throughput", name, size, KOPF_SCHEDULER))
        kube = rows.get(("throughput", name, size, KUBE_SCHEDULER))
        raw = rows.get(("throughput", name, size, RAW_BINDER))
        if not kopf:
            continue
        found = True

        def get(row: dict[str, Any] | None, field: str) -> Any:
            return row.get(field) if row and row.get("complete") else None

        lines.append(
            f"| {name} | {_ratio(throughput(kopf), throughput(kube))} "
            f"| {_ratio(throughput(kopf), throughput(raw))} "
            f"| {_ratio(throughput(kube), throughput(raw))} "
            f"| {_ratio(get(kopf, 'latency_p99_s'), get(kube, 'latency_p99_s'))} "
            f"| {_ratio(get(kopf, 'peak_rss_bytes'), get(kube, 'peak_rss_bytes'))} "
            f"| {_ratio(get(kopf, 'cpu_seconds'), get(kube, 'cpu_seconds'))} "
            f"| {_num(get(kopf, 'cpu_ms_per_pod'), 2)} / {_num(get(kube, 'cpu_ms_per_pod'), 2)} |"
        )
    return lines if found else []


def latency_table(rows: dict[tuple[str, str, str, str], dict[str, Any]]) -> list[str]:
    keys = sorted(k for k in rows if k[0].startswith("latency@"))
    if not keys:
        return []
    lines = [
        "| mode | size | nodes | pods | scheduler | latency p50 | p90 | p99 | max (s) | CPU s | CPU ms/pod "
        "| status |",
        "|---|---|--:|--:|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    order = {k: i for i, k in enumerate(ALL)}
    for key in sorted(keys, key=lambda k: (k[0], k[2], order.get(k[3], 9))):
        row = rows[key]
        rate = key[0].split("@", 1)[1]
        lines.append(
            f"| {rate} pods/s | {key[2]} | {row['nodes']:,} | {row['pods']:,} | {key[3]} "
            f"| {_num(row.get('latency_p50_s'), 3)} | {_num(row.get('latency_p90_s'), 3)} "
            f"| {_num(row.get('latency_p99_s'), 3)} | {_num(row.get('latency_max_s'), 3)} "
            f"| {_num(row.get('cpu_seconds'), 1)} | {_num(row.get('cpu_ms_per_pod'), 2)} | {_status(row)} |"
        )
    return lines


def targets(rows: dict[tuple[str, str, str, str], dict[str, Any]]) -> list[str]:
    """kopf-scheduler against its targets, at the largest size measured for each."""
    lines = ["| target | measured | met |", "|---|---|---|"]

    def row(mode: str, name: str, size: str, kind: str) -> dict[str, Any] | None:
        r = rows.get((mode, name, size, kind))
        return r if r and r.get("complete") else None

    def check(text: str, value: float | None, ok: bool | None, shown: str) -> None:
        verdict = "-" if ok is None else ("yes" if ok else "no")
        lines.append(f"| {text} | {shown if value is not None else '-'} | {verdict} |")

    def no_more_than_theirs(
        text: str, a: dict[str, Any], b: dict[str, Any], field: str, unit: str, digits: int = 2
    ) -> None:
        """kopf-scheduler's ``field`` (row ``a``) against kube-scheduler's (row ``b``), when both have it."""
        if a.get(field) and b.get(field):
            mine, theirs = a[field], b[field]
            shown = f"{mine:.{digits}f} / {theirs:.{digits}f} {unit}"
            check(f"{text} <= kube-scheduler's", mine, mine <= theirs, shown)

    for size in reversed(SIZES):
        if not any(k[2] == size and k[0] == "throughput" for k in rows):
            continue
        for name in WORKLOADS:
            goal = WORKLOADS[name].target
            if goal is None:
                continue
            text = f"{name} ({size}): throughput >= {goal:.1f}x kube-scheduler"
            kopf_row = row("throughput", name, size, KOPF_SCHEDULER)
            kopf, kube = throughput(kopf_row), throughput(row("throughput", name, size, KUBE_SCHEDULER))
            if kopf_row is None or kopf is None or kube is None:
                lines.append(f"| {text} | - | no complete pair |")
                continue
            r = kopf / kube
            pace = kopf_row.get("creation_rate")
            if pace is None:
                check(text, r, r >= goal, f"{r:.2f}x")
                continue
            # created at a fixed pace: neither scheduler can bind faster than the pods arrive, so at or
            # above the pace (within the per-second samples' resolution) the ratio is a tie
            kept = kopf >= pace * (1 - PACE_TOLERANCE)
            shown = f"{r:.2f}x ({kopf:.1f} / {kube:.1f} pods/s, created at {pace:g})"
            check(f"{text}, or kept the creation pace", r, r >= goal or kept, shown)
        for name in WORKLOADS:
            a = row("throughput", name, size, KOPF_SCHEDULER)
            b = row("throughput", name, size, KUBE_SCHEDULER)
            if not a or not b:
                continue
            no_more_than_theirs(f"{name} ({size}): CPU per pod", a, b, "cpu_ms_per_pod", "ms")
            if name in BURST_LATENCY:
                no_more_than_theirs(f"{name} ({size}): burst p99 latency", a, b, "latency_p99_s", "s")
            if name == PREEMPTION:
                wall = f"{name} ({size}): wall-clock time"
                no_more_than_theirs(wall, a, b, "measured_seconds", "s", digits=0)
            if name == MEMORY_AT_SCALE and a.get("peak_rss_bytes") and b.get("peak_rss_bytes"):
                r = a["peak_rss_bytes"] / b["peak_rss_bytes"]
                check(f"{name} ({size}): peak RSS <= 1.0x kube-scheduler", r, r <= 1.0, f"{r:.2f}x")
            if name == MIXED_CHURN and a.get("rss_growth_after_warmup") is not None:
                g = a["rss_growth_after_warmup"]
                check(f"{name} ({size}): RSS growth after warm-up < 5%", g, g < 0.05, f"{100 * g:+.1f}%")
        kopf = throughput(row("throughput", "SchedulingBasic", size, KOPF_SCHEDULER))
        raw = throughput(row("throughput", "SchedulingBasic", size, RAW_BINDER))
        if kopf and raw:
            r = kopf / raw
            check(
                f"SchedulingBasic ({size}): >= 80% of the raw-binder ceiling", r, r >= 0.8, f"{100 * r:.0f}%"
            )
        a, b = (
            row("throughput", "SchedulingBasic", size, KOPF_SCHEDULER),
            row("throughput", "SchedulingBasic", size, KUBE_SCHEDULER),
        )
        if a and b and a.get("peak_rss_bytes") and b.get("peak_rss_bytes"):
            r = a["peak_rss_bytes"] / b["peak_rss_bytes"]
            check(f"SchedulingBasic ({size}): peak RSS <= 1.5x kube-scheduler", r, r <= 1.5, f"{r:.2f}x")
        if a and a.get("api_writes_per_pod_without_events") is not None:
            w = a["api_writes_per_pod_without_events"]
            shown = f"{w:.2f} + {a.get('api_event_writes_per_pod', 0):.2f} event writes"
            check(f"SchedulingBasic ({size}): <= 1 write per pod plus events", w, w <= 1.0 + 1e-9, shown)
        break
    for key in sorted(k for k in rows if k[0].startswith("latency@") and k[3] == KOPF_SCHEDULER):
        a, b = row(*key), row(key[0], key[1], key[2], KUBE_SCHEDULER)
        rate = key[0].split("@", 1)[1]
        if a and a.get("latency_p99_s") is not None:
            p99 = a["latency_p99_s"]
            check(f"p99 creation-to-bound at {rate} pods/s ({key[2]}) < 1 s", p99, p99 < 1.0, f"{p99:.3f} s")
            if b and b.get("latency_p99_s"):
                check(
                    f"p99 at {rate} pods/s ({key[2]}) <= kube-scheduler's ({b['latency_p99_s']:.3f} s)",
                    p99,
                    p99 <= b["latency_p99_s"],
                    f"{p99:.3f} s",
                )
        if a and b:
            no_more_than_theirs(f"CPU per pod at {rate} pods/s ({key[2]})", a, b, "cpu_ms_per_pod", "ms")
    return lines if len(lines) > 2 else []


def over_time_table(rows: dict[tuple[str, str, str, str], dict[str, Any]]) -> list[str]:
    """Long runs (a lifetime per pod, e.g. the churn): latency per minute of creation and resident memory
    after the warm-up and at the end."""
    lines = [
        "| workload | size | scheduler | pods/s created | p99 latency per minute (s) | RSS after warm-up "
        "| at end (MiB) | growth | status |",
        "|---|---|---|--:|---|--:|--:|--:|---|",
    ]
    order = {k: i for i, k in enumerate(ALL)}
    for key in sorted(rows, key=lambda k: (k[1], k[2], order.get(k[3], 9))):
        row = rows[key]
        if key[0] != "throughput" or not row.get("lifetime_s"):
            continue
        windows = " ".join(f"{w[3]:.2f}" for w in row.get("latency_windows") or [])
        growth = row.get("rss_growth_after_warmup")
        lines.append(
            f"| {key[1]} | {key[2]} | {key[3]} | {_num(row.get('creation_rate'))} | {windows or '-'} "
            f"| {_num(row.get('rss_after_warmup_mib'))} | {_num(row.get('rss_end_mib'))} "
            f"| {'-' if growth is None else f'{100 * growth:+.1f}%'} | {_status(row)} |"
        )
    return lines if len(lines) > 2 else []


def failover_table(rows: dict[tuple[str, str, str, str], dict[str, Any]]) -> list[str]:
    """``python -m bench failover``: seconds from a replica's start to ready and to its first binding,
    and from the leader's SIGKILL to the standby's first binding."""
    lines = [
        "| size | nodes | bound pods | pending pods | scheduler | ready (s) | first binding (s) "
        "| all pending bound (s) | a pod created then, bound after (s) | standby ready (s) "
        "| Lease taken over (s) | failover (s) | max latency (s) | status |",
        "|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    order = {k: i for i, k in enumerate(ALL)}
    sizes = {s: i for i, s in enumerate(SIZES)}
    for key in sorted(rows, key=lambda k: (sizes.get(k[2], 9), order.get(k[3], 9))):
        row = rows[key]
        if key[0] != "failover":
            continue
        lines.append(
            f"| {key[2]} | {row['nodes']:,} | {row['init_pods']:,} | {row.get('pending_pods', 0):,} "
            f"| {key[3]} "
            f"| {_num(row.get('startup_seconds'), 2)} | {_num(row.get('first_binding_seconds'), 2)} "
            f"| {_num(row.get('pending_bound_seconds'), 2)} | {_probe(row)} "
            f"| {_num(row.get('standby_ready_seconds'), 2)} "
            f"| {_num(row.get('lease_taken_seconds'), 2)} | {_num(row.get('failover_seconds'), 2)} "
            f"| {_num(row.get('latency_max_s'), 2)} | {_status(row)} |"
        )
    return lines if len(lines) > 2 else []


def _probe(row: dict[str, Any]) -> str:
    """The probe pod of ``python -m bench failover``: created at (s from the start), bound (s) after."""
    if row.get("probe_created_seconds") is None:
        return "-"
    return f"{_num(row['probe_created_seconds'], 1)}: {_num(row.get('probe_bound_after_seconds'), 2)}"


def soak_table(rows: dict[tuple[str, str, str, str], dict[str, Any]]) -> list[str]:
    """``python -m bench soak``: kopf-scheduler's resident set per process over a long run of pod and gang
    churn with credential rotation."""
    lines = [
        "| run | process | RSS start | after warm-up | at end (MiB) | growth | pods bound | gangs whole "
        "(held) | rotations | reloads | status |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for key in sorted(k for k in rows if k[0] == "soak"):
        row = rows[key]
        for name, memory in sorted((row.get("memory") or {}).items(), reverse=True):
            growth = memory.get("rss_growth_after_warmup")
            lines.append(
                f"| {key[2]} | {name} | {_num(memory.get('rss_start_mib'))} "
                f"| {_num(memory.get('rss_after_warmup_mib'))} | {_num(memory.get('rss_end_mib'))} "
                f"| {'-' if growth is None else f'{100 * growth:+.1f}%'} "
                f"| {_num(row.get('bound'))} | {_num(row.get('gangs_bound_whole'))} "
                f"({_num(row.get('gangs_held'))}) | {_num(row.get('rotations'))} "
                f"| {_num(row.get('credential_reloads'))} | {_status(row)} |"
            )
    return lines if len(lines) > 2 else []


def chart(rows: dict[tuple[str, str, str, str], dict[str, Any]], output: Path) -> bool:
    """Grouped bars per workload: kube-scheduler, kopf-scheduler, raw-binder; one panel per size."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sizes = [s for s in SIZES if any(k[0] == "throughput" and k[2] == s for k in rows)]
    if not sizes:
        return False
    fig, axes = plt.subplots(len(sizes), 1, figsize=(11, 4.2 * len(sizes)), squeeze=False)
    colors = {KUBE_SCHEDULER: "#4C72B0", KOPF_SCHEDULER: "#DD8452", RAW_BINDER: "#8C8C8C"}
    width = 0.27
    for ax, size in zip(axes[:, 0], sizes, strict=True):
        names = [n for n in WORKLOADS if any(k[:3] == ("throughput", n, size) for k in rows)]
        for j, kind in enumerate(ALL):
            for i, name in enumerate(names):
                row = rows.get(("throughput", name, size, kind))
                if row is None:
                    continue
                value = row.get("throughput_avg") or row.get("throughput_overall") or 0
                x = i + (j - 1) * width
                complete = bool(row.get("complete"))
                ax.bar(
                    x, value, width, color=colors[kind],
                    hatch=None if complete else "//", edgecolor=None if complete else "black",
                )  # fmt: skip
                text = f"{value:,.0f}" if complete else f"{value:,.0f}\n(incomplete)"
                ax.text(x, value, text, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_ylabel("pods/s (scheduler_perf average)")
        nodes = {rows[k]["nodes"] for k in rows if k[0] == "throughput" and k[2] == size}
        ax.set_title(
            f"Scheduling throughput, size {size} ({', '.join(f'{n:,}' for n in sorted(nodes))} nodes)"
        )
        handles = [plt.Rectangle((0, 0), 1, 1, color=colors[k]) for k in ALL]
        ax.legend(handles, ["kube-scheduler", "kopf-scheduler", "raw binder (API ceiling)"], fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return True


def curve_points(
    rows: dict[tuple[str, str, str, str], dict[str, Any]], kind: str
) -> list[tuple[int, float, float]]:
    """(nodes, CPU ms per pod, p99 latency s) of ``kind``'s complete CURVE_WORKLOAD runs, by nodes."""
    points = []
    for size in SIZES:
        row = rows.get(("throughput", CURVE_WORKLOAD, size, kind))
        if row and row.get("complete") and row.get("cpu_ms_per_pod") and row.get("latency_p99_s"):
            points.append((int(row["nodes"]), float(row["cpu_ms_per_pod"]), float(row["latency_p99_s"])))
    return sorted(points)


def cost_curve(rows: dict[tuple[str, str, str, str], dict[str, Any]], output: Path) -> bool:
    """CPU per pod and p99 latency against the node count, one line per scheduler (CURVE_WORKLOAD)."""
    curves = {kind: curve_points(rows, kind) for kind in (KUBE_SCHEDULER, KOPF_SCHEDULER)}
    if sum(len(points) >= 2 for points in curves.values()) < 2:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (cpu_ax, p99_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = {KUBE_SCHEDULER: "#4C72B0", KOPF_SCHEDULER: "#DD8452"}
    for kind, points in curves.items():
        nodes = [p[0] for p in points]
        cpu_ax.plot(nodes, [p[1] for p in points], "o-", color=colors[kind], label=kind)
        p99_ax.plot(nodes, [p[2] for p in points], "o-", color=colors[kind], label=kind)
        for n, cpu, p99 in points:
            cpu_ax.annotate(f"{cpu:.2f}", (n, cpu), fontsize=7, textcoords="offset points", xytext=(0, 5))
            p99_ax.annotate(f"{p99:.2f}", (n, p99), fontsize=7, textcoords="offset points", xytext=(0, 5))
    for ax, label in ((cpu_ax, "CPU ms per pod"), (p99_ax, "p99 latency, creation to binding (s)")):
        ax.set_xscale("log")
        ax.set_xlabel("nodes")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"How the cost of a pod grows with the cluster ({CURVE_WORKLOAD}, as fast as created)")
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return True


def write(results_dir: Path, output: Path) -> None:
    rows, documents = load(results_dir)
    has_chart = chart(rows, results_dir / CHART)
    has_curve = cost_curve(rows, results_dir / COST_CURVE)
    lines = [
        "# Benchmark results",
        "",
        "Generated by `python -m bench report` (also at the end of every `python -m bench run`) from",
        "`bench/results/*.json`; do not edit by hand. How each number is measured: [README.md](README.md).",
        "",
        "Columns: throughput as scheduler_perf samples it (pods/s); latency from a pod's creation to",
        "its binding, as a watch sees them; CPU seconds and peak RSS of the scheduler process over the",
        "measured phase (CPU ms/pod: those CPU seconds per measured pod); API requests and writes per",
        "measured pod, from the API server's own counters",
        "(event writes in parentheses); *other CPU s*: CPU seconds other programs on the machine took",
        "during the measured phase",
        "(everything shares 2 cores, so a large figure means a disturbed run).",
        "",
    ]
    if has_chart:
        rel = Path(results_dir.name) / CHART if results_dir.parent == output.parent else results_dir / CHART
        lines += [f"![throughput per workload]({rel.as_posix()})", ""]
    if has_curve:
        rel = (
            Path(results_dir.name) / COST_CURVE
            if results_dir.parent == output.parent
            else results_dir / COST_CURVE
        )
        lines += [f"![CPU per pod and p99 latency against the node count]({rel.as_posix()})", ""]
    for size in SIZES:
        table = throughput_table(rows, size)
        if len(table) <= 2:
            continue
        lines += [f"## Throughput workloads, size {size}", "", *table, ""]
        if any(" † |" in line for line in table):
            lines += [
                "† kube-controller-manager runs beside every scheduler (the workload needs its",
                "controllers): its API requests are in the API figures (its own count:",
                "`controller_manager_requests_by_method` in the results), its CPU is not in *other CPU s*",
                "(`controller_manager_cpu_seconds`).",
                "",
            ]
        if any(r.get("throughput_avg") is None and r.get("throughput_overall") for r in rows.values()):
            lines += [
                "\\* the run was too short for a 1-second sample: bound pods / (last bind - first pod seen).",
                "",
            ]
        comparison = comparison_table(rows, size)
        if comparison:
            lines += [f"Ratios, size {size} (complete runs only):", "", *comparison, ""]
    goals = targets(rows)
    if goals:
        lines += ["## kopf-scheduler against its targets", "", *goals, ""]
    over_time = over_time_table(rows)
    if over_time:
        lines += [
            "## Over time: churn",
            "",
            "Measured pods created at a fixed rate, each deleted a while after it is bound, beside",
            "upstream's churn; RSS growth: median resident set of the last tenth of the phase over that of",
            "its third tenth.",
            "",
            *over_time,
            "",
        ]
    latency = latency_table(rows)
    if latency:
        lines += ["## Latency at a fixed creation rate (SchedulingBasic shape)", "", *latency, ""]
    starts = failover_table(rows)
    if starts:
        lines += [
            "## Start-up and failover",
            "",
            "`python -m bench failover`: MemoryAtScale's cluster (bound pods) plus pending pods created",
            "before the scheduler starts, two replicas with leader election (15 s lease, 10 s renew",
            "deadline, 2 s retry). From the first replica's process start: to ready, to the first pending",
            "pod bound, to the last; the standby's start to ready; from the leader's SIGKILL: to the",
            "standby's Lease (its `acquireTime`) and to its first binding; max latency of the failover",
            "phase's pods (created at a steady rate), creation to binding.",
            "",
            *starts,
            "",
        ]
    soaks = soak_table(rows)
    if soaks:
        lines += [
            "## Soak: memory under churn, gangs and credential rotation",
            "",
            "`python -m bench soak`: kopf-scheduler alone, pods and gangs of 8 made and deleted at a steady",
            "rate (some gangs that cannot fit), upstream's churn, and its ServiceAccount token rotated (the",
            "old one refused) every 30 s; resident set of each of its two processes, growth as above.",
            "",
            *soaks,
            "",
        ]
    if documents:
        lines += ["## Machines and versions", ""]
        used = sorted({row["file"] for row in rows.values()})
        for doc in documents:
            if doc["_file"] not in used:
                continue
            m, v = doc.get("machine", {}), doc.get("versions", {})
            loads = [r.get("loadavg_before", [0])[0] for r in doc["runs"]] + [
                r.get("loadavg_after", [0])[0] for r in doc["runs"] if r.get("loadavg_after")
            ]
            foreign = [
                r["foreign_cpu_seconds"] for r in doc["runs"] if r.get("foreign_cpu_seconds") is not None
            ]
            etcd = (v.get("etcd") or "").split()
            parts = [
                f"- `{doc['_file']}`: commit `{doc.get('commit', '')[:12]}`",
                f"{m.get('cpus')} x {m.get('cpu_model')}, {(m.get('memory_bytes') or 0) / 2**30:.0f} GiB",
                f"Python {m.get('python')}",
                f"{v.get('kube-scheduler', '')}, {v.get('kube-apiserver', '')}",
                f"etcd {etcd[-1] if etcd else ''}",
                f"kopf {v.get('kopf', '')}",
                f"1-min load average {min(loads, default=0):.2f} to {max(loads, default=0):.2f}",
            ]
            digests = sorted(
                {r["kopf_scheduler_source"] for r in doc["runs"] if r.get("kopf_scheduler_source")}
            )
            if digests:
                parts.append(f"kopf_scheduler sources {', '.join(digests)}")
            if foreign:
                parts.append(
                    f"CPU used by other processes during a measured phase: up to {max(foreign):.1f} s"
                )
            lines.append("; ".join(parts))
        lines.append("")
    output.write_text("\n".join(lines))
