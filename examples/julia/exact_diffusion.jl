# Decentralized least squares with exact diffusion (Yuan, Ying, Zhao and Sayed, "Exact
# diffusion for distributed optimization and learning", 2017).
#
# Rank i holds (A_i, b_i) and all ranks solve min_x sum_i ||A_i x - b_i||^2 / 2 by talking
# only to their ring neighbors. Plain diffusion (adapt, then combine) stalls at a biased
# point with a constant step; exact diffusion adds a correction and converges to the
# exact minimizer, which rank 0 checks against the centralized solution.
#
#   mpiexec -n 4 julia --project=bindings/julia/Starling examples/julia/exact_diffusion.jl
using LinearAlgebra
using Random
using Starling

function local_problem(rank::Integer, rows::Integer, dim::Integer)
    x_true = randn(MersenneTwister(0), dim)
    A = randn(MersenneTwister(rank + 1), rows, dim) .* (1 + rank)  # heterogeneous data
    b = A * x_true .+ 0.1 .* randn(MersenneTwister(100 + rank), rows)
    return A, b
end

# x* = (sum_i A_i^T A_i) \ (sum_i A_i^T b_i): two allreduces, for reference only.
function centralized_solution(ctx, A, b)
    gram = allreduce!(ctx, transpose(A) * A)
    rhs = allreduce!(ctx, transpose(A) * b)
    return gram \ rhs
end

function main(; iterations::Integer=300, rows::Integer=20, dim::Integer=5)
    Context() do ctx
        A, b = local_problem(ctx.rank, rows, dim)
        x_star = centralized_solution(ctx, A, b)
        step = 1 / allreduce!(ctx, [opnorm(A)^2]; op=:max)[1]

        # Combination weights (I + W) / 2 of the symmetric, doubly stochastic ring W.
        ring = ring_topology(ctx.size)
        set_topology!(ctx, ring; weighted=true)
        w_self, w_in = recv_weights(ring, ctx.rank)
        self_weight = (1 + w_self) / 2
        src_weights = Dict(j => w / 2 for (j, w) in w_in)

        gradient(x) = transpose(A) * (A * x - b)
        x_exact = zeros(dim)
        psi_prev = copy(x_exact)
        x_plain = zeros(dim)
        for k in 1:iterations
            # Exact diffusion: adapt, correct, combine.
            psi = x_exact - step * gradient(x_exact)
            phi = psi + x_exact - psi_prev
            psi_prev = psi
            x_exact = neighbor_allreduce!(ctx, phi; self_weight=self_weight, src_weights=src_weights)
            # Plain diffusion with the same step and weights, for comparison.
            x_plain = neighbor_allreduce!(ctx, x_plain - step * gradient(x_plain);
                                          self_weight=self_weight, src_weights=src_weights)
            if k % 50 == 0 || k == 1
                errors = allreduce!(ctx, [norm(x_exact - x_star), norm(x_plain - x_star)]; op=:max)
                if ctx.rank == 0
                    println("iteration $k: max distance to x* exact diffusion $(errors[1]), plain diffusion $(errors[2])")
                end
            end
        end
        close(ring)
    end
end

main()
