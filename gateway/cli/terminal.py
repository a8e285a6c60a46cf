"""Output for a person at a terminal: tables, sizes, a progress bar, or JSON for scripts."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any, TextIO

import msgspec

PROGRESS_MIN_BYTES = 1024 * 1024
"""Transfers smaller than this get no bar: it would only flicker."""


def human_size(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


SIZE_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}
"""Decimal (`5G`, `5GB`) and binary (`10Mi`, `10MiB`) multipliers of a size argument."""


def parse_size(text: str) -> int:
    """Bytes from `1048576`, `10MiB`, `5G`, `1.5 GB` (argparse type: ValueError on nonsense)."""
    cleaned = text.strip().lower().removesuffix("b").replace(" ", "")
    binary = cleaned.endswith("i")
    cleaned = cleaned.removesuffix("i")
    unit = cleaned[-1] if cleaned and cleaned[-1] in SIZE_UNITS else ""
    number = float(cleaned[: len(cleaned) - len(unit)])
    scale = 1024 ** list(SIZE_UNITS).index(unit) if binary else SIZE_UNITS[unit]
    if number < 0 or (binary and not unit):
        raise ValueError(text)
    return round(number * scale)


def size_of(size: int, human: bool) -> int | str:
    """A size as a table cell: bytes, or with `-h` as `human_size` puts it."""
    return human_size(size) if human else size


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], out: TextIO) -> None:
    """Columns padded to their widest cell; numbers right-aligned."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    numeric = [
        bool(rows) and all(isinstance(row[i], int) for row in rows) for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(values, widths, numeric, strict=True)
        ).rstrip()

    out.write(line(headers) + "\n")
    for row in cells:
        out.write(line(row) + "\n")


def as_json(value: Any) -> str:
    def default(item: Any) -> Any:
        if is_dataclass(item) and not isinstance(item, type):
            return asdict(item)
        if isinstance(item, msgspec.Struct):
            return msgspec.to_builtins(item)  # the API's own (camelCase) names
        raise TypeError(f"{type(item).__name__} is not JSON")

    return json.dumps(value, default=default, ensure_ascii=False, indent=2)


class ProgressBar:
    """One line on stderr, redrawn at most ten times a second, for transfers of a MiB or
    more; off when stderr is not a terminal unless forced."""

    def __init__(self, enabled: bool | None = None, out: TextIO = sys.stderr) -> None:
        self.enabled = out.isatty() if enabled is None else enabled
        self._out = out
        self._drawn_at = 0.0
        self._started = time.monotonic()
        self._width = 0

    def update(self, name: str, done: int, total: int | None) -> None:
        if not self.enabled or (total is not None and total < PROGRESS_MIN_BYTES):
            return
        now = time.monotonic()
        if now - self._drawn_at < 0.1 and done != total:
            return
        self._drawn_at = now
        rate = done / max(now - self._started, 1e-6)
        if total:
            filled = int(30 * done / total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {100 * done // total:3d}%"
            amount = f"{human_size(done)} / {human_size(total)}"
        else:
            bar, amount = "[" + "?" * 30 + "]", human_size(done)
        text = f"{name[-40:]:40} {bar} {amount} {human_size(rate)}/s"
        self._out.write("\r" + text.ljust(self._width))
        self._width = len(text)
        self._out.flush()

    def tracker(self, name: str) -> Callable[[int, int | None], None]:
        """The progress callback of one transfer."""
        return lambda done, total: self.update(name, done, total)

    def start(self) -> None:
        self._started = time.monotonic()

    def clear(self) -> None:
        if self.enabled and self._width:
            self._out.write("\r" + " " * self._width + "\r")
            self._out.flush()
            self._width = 0


def summary(verb: str, files: int, size: int, seconds: float, failed: int = 0) -> str:
    rate = size / max(seconds, 1e-6) / 1e6
    text = (
        f"{verb} {files} file{'s' if files != 1 else ''} ({human_size(size)}) in "
        f"{seconds:.1f} s, {rate:.1f} MB/s"
    )
    return text + (f"; {failed} failed" if failed else "")
