"""Threads per llama.cpp call: the physical cores idle since the last look (models/cpu.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from deepresearch.models import cpu
from deepresearch.models.cpu import ThreadChooser, physical_cores


def write_stat(path: Path, per_cpu: list[tuple[int, int]]) -> None:
    """A /proc/stat with (busy, idle) ticks per CPU (busy as user time, idle as idle time)."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0" for i, (busy, idle) in enumerate(per_cpu)]
    path.write_text("\n".join(lines) + "\nintr 1\n")


def write_topology(root: Path, siblings: list[str]) -> None:
    for i, sib in enumerate(siblings):
        (root / f"cpu{i}" / "topology").mkdir(parents=True)
        (root / f"cpu{i}" / "topology" / "thread_siblings_list").write_text(sib + "\n")


@pytest.fixture
def two_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu, "usable_cpus", lambda: [0, 1])
    write_topology(tmp_path / "sys", ["0", "1"])
    stat = tmp_path / "stat"
    write_stat(stat, [(0, 0), (0, 1)])
    return stat, tmp_path / "sys"


def chooser_after(stat: Path, sys_root: Path, per_cpu: list[tuple[int, int]], window: float = 0.25) -> ThreadChooser:
    chooser = ThreadChooser(stat, sys_root)
    chooser.look()
    time.sleep(window)  # sleeping: this process's own CPU time in the window is ~0
    write_stat(stat, per_cpu)
    return chooser


@pytest.mark.parametrize(
    ("ticks", "threads"),
    [
        ([(2, 98), (1, 99)], 2),  # a quiet machine: every physical core
        ([(100, 0), (3, 97)], 1),  # a core another process keeps busy is left to it
        ([(50, 50), (0, 100)], 1),  # half a busy core is not counted idle
        ([(100, 0), (100, 0)], 1),  # a saturated machine: still one thread
    ],
)
def test_threads_are_the_idle_physical_cores(two_cores, ticks, threads):
    assert chooser_after(*two_cores, ticks).choose() == threads


def test_before_a_window_or_in_a_too_short_one_the_count_stands(two_cores):
    stat, sys_root = two_cores
    chooser = ThreadChooser(stat, sys_root)
    assert chooser.choose() == 1  # no look yet: half the usable cores, llama.cpp's default
    chooser.look()
    write_stat(stat, [(0, 100), (0, 101)])
    assert chooser.choose() == 1  # the window is shorter than MIN_WINDOW_S
    time.sleep(cpu.MIN_WINDOW_S + 0.05)
    assert chooser.choose() == 2


def test_an_unreadable_stat_keeps_the_count(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu, "usable_cpus", lambda: [0, 1, 2, 3])
    chooser = ThreadChooser(tmp_path / "no-stat", tmp_path / "no-sys")
    chooser.look()
    time.sleep(cpu.MIN_WINDOW_S + 0.05)
    assert chooser.choose() == 2


def test_a_stat_file_in_another_format_keeps_the_count(two_cores):
    stat, sys_root = two_cores
    chooser = ThreadChooser(stat, sys_root)
    chooser.look()
    time.sleep(cpu.MIN_WINDOW_S + 0.05)
    stat.write_text("cpu0 12 x\ncpu1 3\n")
    assert chooser.choose() == 1


def test_hyperthread_siblings_are_one_core(tmp_path):
    write_topology(tmp_path, ["0,2", "1,3", "0,2", "1,3"])
    assert physical_cores([0, 1, 2, 3], tmp_path) == 2
    assert physical_cores([0, 1, 2, 3], tmp_path / "missing") == 2  # unreadable: half


def test_the_real_machine_gives_a_count_between_one_and_its_cores():
    chooser = ThreadChooser()
    chooser.look()
    time.sleep(cpu.MIN_WINDOW_S + 0.05)
    assert 1 <= chooser.choose() <= max(1, physical_cores(cpu.usable_cpus()))
