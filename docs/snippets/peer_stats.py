# ranks: 2 4
# Which peer holds this rank up: per-peer traffic and waits (Context.peer_stats()).
import time

import numpy as np
import starling

ctx = starling.Context()
slow = ctx.size - 1                             # this rank computes 5x longer per step
x = np.zeros(100_000, dtype=np.float32)
start = ctx.peer_stats()
steps = 10
for step in range(steps):
    time.sleep(0.05 if ctx.rank == slow else 0.01)  # "compute"
    x = ctx.neighbor_allreduce(x)               # exchange with the topology's neighbors

mean_ms = {}                                    # peer -> wait per training step
sources = set()                                 # peers this rank received from
for peer, (now, then) in enumerate(zip(ctx.peer_stats(), start)):
    if now["messages_received"] > then["messages_received"]:
        sources.add(peer)
    if now["waits"] > then["waits"]:            # exchanged something with this peer
        mean_ms[peer] = (now["wait_ns"] - then["wait_ns"]) / steps / 1e6
        print(f"rank {ctx.rank}, peer {peer}: sent {now['bytes_sent'] - then['bytes_sent']} B, received "
              f"{now['bytes_received'] - then['bytes_received']} B, waited {mean_ms[peer]:.1f} ms per step",
              flush=True)
if slow in sources:                             # the slow rank is the one its receivers wait for
    assert max(mean_ms, key=mean_ms.get) == slow, mean_ms
print(f"rank {ctx.rank}: {ctx.stats()['blocked_ns'] / 1e9:.2f} s blocked in Starling calls", flush=True)
ctx.close()
