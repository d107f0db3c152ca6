# ranks: 1 2 4
# Pairs over fast links, re-measured as the job runs (GetAdaptiveFastPairSendRecvRanks).
import starling.torch as bf
import torch

bf.init()
# Measures (collectively) before the first step and every 50 steps; a link slower than
# 8x the median link sits out until the next measurement.
schedule = bf.GetAdaptiveFastPairSendRecvRanks(bf.link_latencies, bf.rank(), factor=8.0, every=50)

x = torch.full((1000,), float(bf.rank()), dtype=torch.float64)
for step in range(120):
    send, recv = next(schedule)                 # every rank steps its schedule alike
    x = bf.neighbor_allreduce(x, self_weight=0.5 if recv else 1.0,
                              src_weights={r: 0.5 for r in recv}, dst_weights=send)
assert schedule.measurements == 3              # at steps 0, 50 and 100
if bf.rank() == 0:
    print(f"threshold {schedule.threshold_seconds * 1e6:.1f} us, split: {schedule.split}", flush=True)
assert torch.allclose(x, torch.full_like(x, (bf.size() - 1) / 2))  # everyone at the average
bf.shutdown()
