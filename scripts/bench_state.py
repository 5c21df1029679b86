"""Benchmark: the cost of one tracked state update as the state grows.

One tracked update = ``update`` (append one item to a list of N items and set one
scalar), then ``get_step_writes`` and ``reset_tracking``, as a tool context does.
With structural sharing it should not depend on N (target: the N = 100,000 figure
within 3x of the N = 10 one) in array delta mode, the mode the runtime uses. Full
replace mode is shown for comparison: its writes hold the whole array, so they grow
with N by design.

    python scripts/bench_state.py

``run()`` returns the figures for ``scripts/bench.py``.
"""

from __future__ import annotations

import time
from typing import Any

from helix_dbos.state import DictDraft, StateTracker

SIZES = (10, 1_000, 100_000)
TARGET_RATIO = 3.0


def _tracked_update(tracker: StateTracker, number: int) -> None:
    def change(draft: DictDraft) -> None:
        draft.items.append({"id": number, "text": "note"})
        draft.count = number

    tracker.update(change)
    tracker.get_step_writes()
    tracker.reset_tracking()


def microseconds_per_update(size: int, array_delta_mode: bool, rounds: int = 5, per_round: int = 400) -> float:
    """Best-of-``rounds`` mean time of one tracked update on a list of ``size`` items, in µs."""
    items = [{"id": number, "text": "note"} for number in range(size)]
    tracker = StateTracker({"items": items, "count": 0}, array_delta_mode=array_delta_mode)
    _tracked_update(tracker, -1)
    best = float("inf")
    for round_number in range(rounds):
        started = time.perf_counter()
        for number in range(per_round):
            _tracked_update(tracker, round_number * per_round + number)
        best = min(best, (time.perf_counter() - started) / per_round)
    return best * 1e6


def run() -> dict[str, Any]:
    """The figures: µs per tracked update by list size, per mode, and the 100k/10 ratio."""
    delta = {size: microseconds_per_update(size, array_delta_mode=True) for size in SIZES}
    full = {size: microseconds_per_update(size, array_delta_mode=False, per_round=20) for size in SIZES}
    ratio = delta[SIZES[-1]] / delta[SIZES[0]]
    return {
        "us_per_update": delta,
        "ratio_100k_to_10": ratio,
        "within_target": ratio <= TARGET_RATIO,
        "full_replace_us_per_update": full,
    }


def main() -> None:
    figures = run()
    print("tracked update = append one item + set one scalar, then get_step_writes")
    print(f"{'N items':>10} {'delta mode (µs)':>16} {'full replace (µs)':>18}")
    for size in SIZES:
        delta = figures["us_per_update"][size]
        full = figures["full_replace_us_per_update"][size]
        print(f"{size:>10,} {delta:>16.1f} {full:>18.1f}")
    verdict = "within" if figures["within_target"] else "OVER"
    print(
        f"ratio 100,000 / 10 (delta mode): {figures['ratio_100k_to_10']:.2f}x ({verdict} the {TARGET_RATIO:g}x target)"
    )


if __name__ == "__main__":
    main()
