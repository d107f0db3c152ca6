# ranks: none (no Julia runtime on the machines this project is tested on; see the Julia tutorial)
# Decentralized averaging from Julia: run with
#   STARLING_LIBRARY=build/libstarling.so.0 starlingrun -np 4 julia --project=bindings/julia/Starling first.jl
using Starling

Context() do ctx                                  # collective; closed at the end of the block
    x = fill(Float64(ctx.rank), 1024)
    allreduce!(ctx, x; op=:average)               # in place: every rank holds the average
    @assert all(x .≈ (ctx.size - 1) / 2)
    y = fill(Float64(ctx.rank), 2, 2)
    for step in 1:30
        neighbor_allreduce!(ctx, y)               # average with the exponential-2 neighbors
    end
    req = allreduce_nonblocking!(ctx, similar(x), x; op=:sum)
    total = wait(req)                             # the output array
    println("rank $(ctx.rank) of $(ctx.size): $(y[1]) $(in_neighbors(ctx))")
end
