"""A run's results as a Markdown table of ratios against their targets, and a PNG chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

Row = tuple[str, str, str, float | None, str]
"""(measure, bucketd, reference, ratio, target)."""


def rows(report: dict[str, Any]) -> list[Row]:
    found: list[Row] = []
    small = report.get("small")
    if small:
        for key in ("put", "get", "inline put", "inline get"):
            label = key.upper().replace("INLINE", "inline")
            for point, result in small.get(key, {}).items():
                size, concurrency = point.split("@")
                ceiling = small["ceiling"][concurrency]["ops_per_s"]
                target = (
                    ("≥ 0.35" if key.endswith("put") else "≥ 0.50")
                    if size == "1024" and concurrency == "16"
                    else ""
                )
                found.append(
                    (
                        f"/v1 {label} {int(size) // 1024} KiB, c={concurrency} (ops/s)",
                        f"{result['ops_per_s']:.0f} "
                        f"(p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms)",
                        f"hello {ceiling:.0f}",
                        result["vs_ceiling"],
                        target,
                    )
                )
    for transfer in report.get("large", {}).get("transfers", []):
        mib = transfer["size_mib"]
        found.append(
            (
                f"/v1 upload {mib} MiB (MB/s)",
                f"{transfer['upload_mb_s']:.0f} (RSS {transfer['upload_peak_rss_mib']:.0f} MiB)",
                f"disk write {transfer['raw_write_mb_s']:.0f}",
                transfer["upload_vs_raw_write"],
                "≥ 0.85" if mib >= 1024 else "",
            )
        )
        found.append(
            (
                f"/v1 download {mib} MiB (MB/s)",
                f"{transfer['download_mb_s']:.0f} "
                f"(RSS {transfer['download_peak_rss_mib']:.0f} MiB)",
                f"disk read {transfer['raw_read_mb_s']:.0f}",
                transfer["download_vs_raw_read"],
                "≥ 0.85" if mib >= 1024 else "",
            )
        )
    listing = report.get("listing")
    if listing:
        found.append(
            (
                f"/v1 list {listing['keys']:,} keys, last page vs first (ms)",
                f"{listing['last_pages_ms']}",
                f"first {listing['first_pages_ms']}",
                listing["last_vs_first"],
                "≤ 2",
            )
        )
    versions = report.get("versions")
    if versions:
        for api, label in (("s3", "S3 ListObjectVersions"), ("v1", "/v1 list versions")):
            ends = versions[api]
            found.append(
                (
                    f"{label}, {versions['versions']:,} versions, last page vs first (ms)",
                    f"{ends['last_pages_ms']}",
                    f"first {ends['first_pages_ms']}",
                    ends["last_vs_first"],
                    "≤ 2",
                )
            )
    found += peer_rows(report.get("peers") or {})
    writers = report.get("writers")
    if writers:
        mine, theirs = writers["cross-process"], writers["one-writer"]
        found.append(
            (
                "index writes, 2 processes: per-process commits under a lock vs one writer "
                "process (writes/s)",
                f"{mine['writes_per_s']:.0f} ({mine['cpu_ms_per_write']} ms CPU each)",
                f"one writer {theirs['writes_per_s']:.0f} ({theirs['cpu_ms_per_write']} ms)",
                round(mine["writes_per_s"] / theirs["writes_per_s"], 3),
                "",
            )
        )
    snapshots = report.get("snapshots")
    if snapshots:
        for index in ("sqlite", "postgres"):
            measured = snapshots.get(index)
            for op in ("snapshot", "restore", "fork", "delete") if measured else ():
                what = "delete the snapshot" if op == "delete" else op
                found.append(
                    (
                        f"{what} of a bucket of {snapshots['objects']:,} objects, {index} (ms)",
                        f"{measured[op]}",
                        "1 s",
                        round(measured[op] / 1000, 3),
                        "≤ 0.5",
                    )
                )
    scale = report.get("scale_out")
    if scale:
        for count, measured in scale["gateways"].items():
            for op in ("put", "get"):
                result = measured[op]
                found.append(
                    (
                        f"scale-out {op.upper()} {scale['size'] // 1024} KiB, {count} gateway"
                        f"{'s' if count != '1' else ''}, c={scale['concurrency']} (ops/s)",
                        f"{result['ops_per_s']:.0f} (p50 {result['p50_ms']} ms)",
                        f"1 gateway {scale['gateways']['1'][op]['ops_per_s']:.0f}",
                        result.get("vs_one_gateway"),
                        "",
                    )
                )
    return found


REFERENCES = ("seaweedfs", "seaweedfs-fsync")
"""The peers bucketd --workers 2 is read against: SeaweedFS by default and with fsync on."""
OWN_ROWS = ("bucketd", "empty")
"""Prefixes of the rows that are bucketd's variants or the empty app, not peers."""


def peer_rows(peers: dict[str, Any]) -> list[Row]:
    """bucketd against each peer (SeaweedFS in both configurations first), then request
    handling alone: the null backend against the empty app and against SeaweedFS."""
    found: list[Row] = []
    ours = peers.get("bucketd")
    harness = peers.get("harness", {})
    point = f"{harness.get('object_bytes', 4096) // 1024} KiB c={harness.get('concurrency', 16)}"
    named = {
        name: result
        for name, result in peers.items()
        if isinstance(result, dict) and "put" in result and not name.startswith(OWN_ROWS)
    }
    workers = peers.get("bucketd-2w")
    for name, reference in named.items() if ours else ():
        if not (workers and name in REFERENCES):
            continue
        for op in ("put", "get"):
            mine, theirs = workers[op]["ops_per_s"], reference[op]["ops_per_s"]
            found.append(
                (
                    f"S3 {op.upper()} {point}, bucketd --workers 2 vs {name} (ops/s)",
                    f"{mine:.0f}",
                    f"{name} {theirs:.0f}",
                    _ratio(mine, theirs),
                    "≥ 1" if name == "seaweedfs" else "",
                )
            )
    for name, result in named.items() if ours else ():
        found += _versus_peer(ours, name, result, point)
    found += _request_handling(peers, point)
    return found


def _ratio(mine: float, theirs: float) -> float | None:
    return round(mine / theirs, 3) if theirs else None


def _versus_peer(ours: dict[str, Any], name: str, result: dict[str, Any], point: str) -> list[Row]:
    found: list[Row] = []
    targeted = name == "seaweedfs"
    for op in ("put", "get"):
        found.append(
            (
                f"S3 {op.upper()} {point} vs {name} (ops/s)",
                f"{ours[op]['ops_per_s']:.0f}",
                f"{name} {result[op]['ops_per_s']:.0f}",
                _ratio(ours[op]["ops_per_s"], result[op]["ops_per_s"]),
                "≥ 1" if targeted else "",
            )
        )
        if "server_cpu_ms_per_op" in result[op]:
            mine, theirs = (r[op]["server_cpu_ms_per_op"] for r in (ours, result))
            found.append(
                (
                    f"S3 server CPU per {op.upper()} {point} vs {name} (ms)",
                    f"{mine}",
                    f"{name} {theirs}",
                    _ratio(mine, theirs),
                    "≤ 1" if targeted else "",
                )
            )
    if "seq_put" in result:
        mine, theirs = ours["seq_put"]["p50_ms"], result["seq_put"]["p50_ms"]
        found.append(
            (
                f"S3 PUT 1 KiB c=1 latency p50 vs {name} (ms)",
                f"{mine}",
                f"{name} {theirs}",
                _ratio(mine, theirs),
                "≤ 1.5" if targeted else "",
            )
        )
    for op in ("upload", "download") if "large" in ours and "large" in result else ():
        mine, theirs = ours["large"][f"{op}_mb_s"], result["large"][f"{op}_mb_s"]
        found.append(
            (
                f"S3 {op} large vs {name} (MB/s)",
                f"{mine:.0f}",
                f"{name} {theirs:.0f}",
                _ratio(mine, theirs),
                "≥ 0.9" if targeted else "",
            )
        )
    return found


def _request_handling(peers: dict[str, Any], point: str) -> list[Row]:
    """The null backend (no content kept) against the empty app on the same server stack,
    and against SeaweedFS's default: what request handling alone costs and yields."""
    found: list[Row] = []
    for suffix, processes in (("", "1 process"), ("-2w", "2 processes")):
        null = peers.get(f"bucketd-null{suffix}")
        if null is None:
            continue
        for other in (f"empty{suffix}", "seaweedfs"):
            theirs = peers.get(other)
            if theirs is None:
                continue
            for op in ("put", "get"):
                found.append(
                    (
                        f"S3 {op.upper()} {point}, null backend, {processes} vs {other} (ops/s)",
                        f"{null[op]['ops_per_s']:.0f} "
                        f"({null[op]['server_cpu_ms_per_op']} ms CPU each)",
                        f"{other} {theirs[op]['ops_per_s']:.0f} "
                        f"({theirs[op]['server_cpu_ms_per_op']} ms)",
                        _ratio(null[op]["ops_per_s"], theirs[op]["ops_per_s"]),
                        "",
                    )
                )
    return found


def markdown(report: dict[str, Any]) -> str:
    machine = report["machine"]
    lines = [
        f"Run {report['date']} on {machine['cores']} cores, {machine['ram_gib']} GiB RAM "
        f"(Python {machine['python']}).",
        "",
        "| measure | bucketd | reference (same run) | ratio | target |",
        "|---|---|---|---|---|",
    ]
    for measure, ours, reference, ratio, target in rows(report):
        lines.append(
            f"| {measure} | {ours} | {reference} | {'' if ratio is None else ratio} | {target} |"
        )
    return "\n".join(lines) + "\n"


def chart(report: dict[str, Any], path: Path) -> None:
    data = [
        (measure, ratio, target)
        for measure, _, _, ratio, target in rows(report)
        if ratio is not None
    ]
    if not data:
        return
    try:
        import matplotlib
    except ImportError:  # the figures are saved already; only the picture needs the extra
        print("no chart: matplotlib is missing (pip install -e '.[bench]')")
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = max(3.0, 0.32 * len(data) + 1)
    figure, axes = plt.subplots(figsize=(10, height))
    labels = [measure.split(" (")[0] for measure, _, _ in data]
    values = [ratio for _, ratio, _ in data]
    colours = []
    for _, ratio, target in data:
        threshold = float(target.split()[-1]) if target else None
        good = threshold is None or (
            ratio <= threshold if target.startswith("≤") else ratio >= threshold
        )
        colours.append("#2b8a3e" if good else "#c92a2a")
    # A log scale: the ratios run from a few hundredths (PUT against the hello ceiling) to
    # tens (downloads against moto), and a linear axis flattens the small ones to nothing.
    floor = min(0.01, min(values) / 2)
    axes.barh(range(len(values)), [v - floor for v in values], left=floor, color=colours)
    axes.set_xscale("log")
    for index, (_, ratio, target) in enumerate(data):
        axes.annotate(
            f"{ratio:.2f}",
            (ratio, index),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
        if target:
            axes.plot(
                [float(target.split()[-1])] * 2,
                [index - 0.4, index + 0.4],
                color="#212529",
                linewidth=1.5,
            )
    axes.set_yticks(range(len(values)), labels, fontsize=8)
    axes.invert_yaxis()
    axes.axvline(1.0, color="#495057", linewidth=0.8, linestyle="--")
    axes.set_xlabel(
        "bucketd / reference measured in the same run, log scale "
        "(black tick: target; green: target met or none set)"
    )
    axes.set_title(f"bucketd benchmarks, {report['date']}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
