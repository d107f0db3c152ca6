"""The release plan of priority-scheduled gradient averaging (ByteScheduler's idea on
an engine that runs operations in submission order).

Starling's engine runs operations in the order they were submitted, the same on every
rank, so a gradient can only overtake another if it is submitted first. The plan says,
for each event of the backward pass (event k: the k-th gradient of the agreed order
became ready), which partitions to submit then, and which to hold back until the
backward pass ends, to be submitted in priority order (the input layers first, as the
next forward pass needs them first). A partition is held back once the link already
has enough queued to stay busy until the next event: sent earlier it would not start
sooner, and held it can still be overtaken.

The plan is a pure function of numbers every rank shares (rank 0's measured timings),
so every rank computes the same plan and submits the same operations in the same
order, with no negotiation while training.
"""

import heapq
from typing import List, Sequence, Tuple


def partition(numels: Sequence[int], element_bytes: Sequence[int], partition_bytes: int) -> List[Tuple[int, int, int]]:
    """Cuts tensor i (numels[i] elements of element_bytes[i] bytes) into (i, start, stop)
    ranges of at most partition_bytes (at least one element each), in order."""
    parts = []
    for i, (numel, size) in enumerate(zip(numels, element_bytes)):
        step = max(1, partition_bytes // size)
        parts += [(i, start, min(start + step, numel)) for start in range(0, numel, step)]
    return parts


def plan(part_bytes: Sequence[int], part_event: Sequence[int], part_key: Sequence[Tuple[int, ...]],
         event_times: Sequence[float], end_time: float, seconds_per_byte: float,
         lead: float) -> Tuple[List[List[int]], List[int]]:
    """Simulates a link that moves a byte in seconds_per_byte, fed by a scheduler that
    keeps it busy until lead seconds past the next event, choosing the ready partition
    of smallest part_key first. Partition j becomes ready at event part_event[j], at
    event_times[part_event[j]] (non-decreasing); the backward pass ends at end_time.

    Returns (releases, final): releases[k] lists the partitions to submit at event k,
    in order; final, those to submit when the backward pass ends, in priority order.
    With seconds_per_byte 0 (a link that keeps up) each partition goes at its event."""
    events = len(event_times)
    ready_at: List[List[int]] = [[] for _ in range(events)]
    for j, k in enumerate(part_event):
        ready_at[k].append(j)
    releases: List[List[int]] = [[] for _ in range(events)]
    waiting: List[Tuple[Tuple[int, ...], int]] = []
    busy_until = 0.0
    for k in range(events):
        for j in ready_at[k]:
            heapq.heappush(waiting, (part_key[j], j))
        horizon = (event_times[k + 1] if k + 1 < events else end_time) + lead
        while waiting and busy_until < horizon:
            _, j = heapq.heappop(waiting)
            busy_until = max(busy_until, event_times[k]) + part_bytes[j] * seconds_per_byte
            releases[k].append(j)
    return releases, [j for _, j in sorted(waiting)]
