# ranks: 1 2 4
# Averaging around slow links: pairs over fast links only (GetFastPairSendRecvRanks).
import starling.torch as bf
import torch

bf.init()
links = bf.link_latencies()                     # seconds, size x size, the same on every rank
threshold = 10 * float(links.max()) + 1e-3      # every link of this one host is "fast"
if bf.size() == 4:
    links[0, 1] = 2 * threshold                 # declare rank 0's link to rank 1 slow
schedule = bf.GetFastPairSendRecvRanks(links, bf.rank(), threshold)

x = torch.full((1000,), float(bf.rank()), dtype=torch.float64)
for step in range(3 * bf.size()):
    send, recv = next(schedule)                 # ([peer], [peer]) or ([], [])
    assert not (bf.size() == 4 and bf.rank() in (0, 1) and send == [1 - bf.rank()])
    x = bf.neighbor_allreduce(x, self_weight=0.5 if recv else 1.0,
                              src_weights={r: 0.5 for r in recv}, dst_weights=send)
total = bf.allreduce(x, average=False, name="total")
assert torch.allclose(total, torch.full_like(x, sum(range(bf.size()))))  # the sum is kept
print(f"rank {bf.rank()}: {x[0].item():.4f} (the average is {(bf.size() - 1) / 2})", flush=True)
bf.shutdown()
