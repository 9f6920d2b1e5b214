"""How many llama.cpp threads the next call should use: the physical cores that are idle now.

llama.cpp's threads spin-wait on each other, so a thread on a core another process keeps busy
slows the whole call: on 2 cores with one busy, two threads generate 2× slower than one (and 10×
slower under a heavy load), with no faster prompt. On a quiet machine two threads read the
prompt twice as fast as one (Qwen2.5-Coder-1.5B, 2 cores: 73 against 36 tokens/s;
docs/BENCHMARKS.md, session 24). `llm.n_threads: null` therefore means: as many threads as
physical cores were idle since the last look, at least one.

Idle is measured from /proc/stat over the usable CPUs (this process's affinity, so a
container's cpuset counts, not the host's), between two looks — the model load, or the time
since the previous call — minus this process's own CPU time in that window. Off Linux, or
when the window is too short to tell, the previous count stands (at first: half the usable
cores, llama.cpp's own default).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MIN_WINDOW_S = 0.2  # shorter windows are a few scheduler ticks: too coarse to count idle cores
SPARE = 0.25  # a core counts as idle when at least 3/4 of it was free


def usable_cpus() -> list[int]:
    """CPUs this process may run on (a container's cpuset, not the host's count)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return list(range(os.cpu_count() or 2))


def half_the_cores(cpus: list[int] | None = None) -> int:
    """llama.cpp's own default: half of `cpus` (the usable CPUs), at least 1."""
    return max(1, len(usable_cpus() if cpus is None else cpus) // 2)


def physical_cores(cpus: list[int], sys_root: Path = Path("/sys/devices/system/cpu")) -> int:
    """Physical cores among `cpus` (hyperthread siblings counted once); half of them when the
    topology cannot be read (llama.cpp's default)."""
    cores = set()
    for cpu in cpus:
        try:
            cores.add((sys_root / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text().strip())
        except OSError:
            return half_the_cores(cpus)
    return max(1, len(cores))


def _busy_and_total(cpus: list[int], stat: Path) -> tuple[int, int] | None:
    """Busy and total ticks of `cpus` since boot (from /proc/stat), None where it cannot be read."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    busy = total = 0
    for line in lines:
        fields = line.split()
        if fields and fields[0] in wanted:
            try:
                ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
                idle = ticks[3] + ticks[4]
            except (ValueError, IndexError):  # not the format this reads: no count, the previous one stands
                return None
            total += sum(ticks)
            busy += sum(ticks) - idle
    return (busy, total) if total else None


class ThreadChooser:
    """Chooses the thread count before each call from the idle cores since the previous look."""

    def __init__(self, stat: Path = Path("/proc/stat"), sys_root: Path = Path("/sys/devices/system/cpu")):
        self.stat = stat
        self.cpus = usable_cpus()
        self.physical = physical_cores(self.cpus, sys_root)
        self.threads = half_the_cores()
        self._mark: tuple[float, float, tuple[int, int] | None] | None = None

    def look(self) -> None:
        """Start a window now (before the model loads, and after each call)."""
        self._mark = (time.monotonic(), time.process_time(), _busy_and_total(self.cpus, self.stat))

    def choose(self) -> int:
        """Threads for the call about to start: the physical cores idle in the window, at least 1."""
        if self._mark is None:
            return self.threads
        start, own_start, before = self._mark
        now, after = time.monotonic(), _busy_and_total(self.cpus, self.stat)
        if before is None or after is None or now - start < MIN_WINDOW_S or after[1] <= before[1]:
            return self.threads
        share = (after[0] - before[0]) / (after[1] - before[1])  # of all the usable CPUs' time
        others = max(0.0, share * len(self.cpus) - (time.process_time() - own_start) / (now - start))
        idle = len(self.cpus) - others
        self.threads = max(1, min(self.physical, int(idle + SPARE)))
        return self.threads
