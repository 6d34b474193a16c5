/*
 * dbscan_dclust.cu — CUDA-DClust (Böhm, Noll, Plant, Wackersreuther,
 * CIKM 2009) on the kd-tree: the components of the core points as chains
 * of seeds grown in parallel, merged through a collision matrix.  The core
 * flags come from the tree's count pass and the border points from its
 * border pass, as for union-find, so the labels are the same exact DBSCAN
 * (border points by the shared nearest-core rule, where the paper let the
 * first chain to reach one keep it).
 *
 * A generation starts up to DC_G chains, each at an unclaimed core point,
 * spread evenly over the unclaimed ones (in tree order).  Each chain's
 * seed list is its frontier: the core points it claimed last round.  A
 * round expands every chain's seeds at once, by the tree's query nodes
 * (the blocks of tr_query), so that seeds of one node share the candidate
 * tiles; a seed's core neighbour that no chain holds is claimed
 * (atomicCAS) for the seed's chain and becomes its seed next round, and
 * one that another chain holds sets the pair's bit in the generation's
 * collision matrix (DC_G x DC_G bits).  When no chain has seeds left, the
 * chains are merged through the matrix (union-find over the generation's
 * chains) and the next generation starts, until every core point is
 * claimed.  A chain never meets an older generation's chain: those were
 * grown until no unclaimed core neighbour was left.  Every core point is
 * expanded once, so the chains hold the connected components exactly.
 */
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "dbscan_gpu.cuh"

#define DC_G 1024				/* chains a generation */

__global__ void
k_dc_unclaimed(const uint8_t *__restrict__ core, const int *__restrict__ state,
			   int n, int *flag)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < n)
		flag[p] = core[p] && state[p] < 0;
}

/* chain base + k starts at the (k u / g)-th unclaimed core point */
__global__ void
k_dc_seed(const int *__restrict__ list, int64_t u, int g, int base, int *state,
		  uint8_t *front, int *first)
{
	int			k = blockIdx.x * blockDim.x + threadIdx.x;

	if (k < g)
	{
		int			p = list[(int64_t) k * u / g];

		state[p] = base + k;
		front[p] = 1;
		first[base + k] = p;
	}
}

/* the query nodes that hold a seed */
__global__ void
k_dc_active(const uint8_t *__restrict__ front, int n, int qlevel, int *qflag)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < n && front[p])
		qflag[tr_node_of(p, n, qlevel)] = 1;
}

/* the collision matrix's bits as unions of the generation's chains */
__global__ void
k_dc_merge(const unsigned *__restrict__ colmat, int G, int *cpar)
{
	int64_t		w = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (w >= (int64_t) G * G / 32)
		return;
	unsigned	m = colmat[w];

	while (m)
	{
		int			b = __ffs(m) - 1;
		int64_t		bit = w * 32 + b;

		m &= m - 1;
		uf_union(cpar, (int) (bit / G), (int) (bit % G));
	}
}

__global__ void
k_dc_chain_root(int *cpar, int g, int base, int *croot)
{
	int			k = blockIdx.x * blockDim.x + threadIdx.x;

	if (k < g)
		croot[base + k] = base + uf_find(cpar, k);
}

/* each core point: the first seed of its merged chain */
__global__ void
k_dc_rp(const uint8_t *__restrict__ core, const int *__restrict__ state,
		const int *__restrict__ croot, const int *__restrict__ first, int n,
		int *rp)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < n)
		rp[p] = core[p] ? first[croot[state[p]]] : -1;
}

/*
 * The increasing list of the flagged entries of flag[0 .. m), and their
 * count (through nsel, a device int).
 */
static gc_code
dc_compact(db_dev &D, const int *flag, int64_t m, int *list, int *nsel,
		   int64_t *count, gc_status *st)
{
	size_t		bytes = 0;
	int			c;

	DB_CK(cub::DeviceSelect::Flagged(nullptr, bytes, thrust::counting_iterator<int>(0), flag,
									 list, nsel, m, D.s));
	DB_CK(D.scratch(bytes));
	bytes = D.cub_bytes;
	DB_CK(cub::DeviceSelect::Flagged(D.cub_tmp, bytes, thrust::counting_iterator<int>(0), flag,
									 list, nsel, m, D.s));
	DB_CK(cudaMemcpyAsync(&c, nsel, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	*count = c;
	return GC_OK;
}

gc_code
db_dclust(db_dev &D, const gc_ctx *ctx, const db_tree &T, db_lists &L,
		  db_pass &A, int *rp, gc_status *st)
{
	const int	n = T.n;
	const int	G = DC_G;
	int		   *flag,
			   *nsel,
			   *list,
			   *qflag,
			   *qlist,
			   *first,
			   *croot,
			   *cpar,
			   *bad;
	uint8_t    *front,
			   *next;
	unsigned   *colmat;
	int			base = 0,
				bad_h = 0;
	int64_t		generations = 0,
				rounds = 0;
	gc_code		rc;
	std::vector<int64_t> qs_cut(L.cut.size());

	DB_ALLOC(A.state, n);
	DB_ALLOC(flag, n);
	DB_ALLOC(nsel, 1);
	DB_ALLOC(list, n);
	DB_ALLOC(front, n);
	DB_ALLOC(next, n);
	DB_ALLOC(first, n);
	DB_ALLOC(croot, n);
	DB_ALLOC(qflag, T.nq);
	DB_ALLOC(qlist, T.nq);
	DB_ALLOC(cpar, G);
	DB_ALLOC(colmat, (int64_t) G * G / 32);
	DB_ALLOC(bad, 1);
	DB_CK(gc_launch(k_fill, n, DB_THREADS, DB_THREADS, D.s, A.state, n, -1));
	DB_CK(cudaMemsetAsync(front, 0, (size_t) n, D.s));
	DB_CK(cudaMemsetAsync(next, 0, (size_t) n, D.s));
	DB_CK(cudaMemsetAsync(bad, 0, sizeof(int), D.s));
	A.G = G;
	A.colmat = colmat;
	A.bad = bad;

	for (;;)
	{
		int64_t		u,
					g;

		/* a generation: up to G chains at unclaimed core points */
		DB_CK(gc_launch(k_dc_unclaimed, n, DB_THREADS, DB_THREADS, D.s,
						(const uint8_t *) A.core, (const int *) A.state, n, flag));
		if ((rc = dc_compact(D, flag, n, list, nsel, &u, st)) != GC_OK)
			return rc;
		if (u == 0)
			break;
		g = u < G ? u : G;
		A.base = base;
		DB_CK(cudaMemsetAsync(colmat, 0, sizeof(unsigned) * (size_t) G * G / 32, D.s));
		DB_CK(gc_launch(k_iota, G, DB_THREADS, DB_THREADS, D.s, cpar, G));
		DB_CK(gc_launch(k_dc_seed, g, DB_THREADS, DB_THREADS, D.s, (const int *) list, u,
						(int) g, base, A.state, front, first));
		generations++;

		/* rounds: every chain's seeds expanded at once */
		for (;;)
		{
			int64_t		m;

			DB_CK(cudaMemsetAsync(qflag, 0, sizeof(int) * (size_t) T.nq, D.s));
			DB_CK(gc_launch(k_dc_active, n, DB_THREADS, DB_THREADS, D.s,
							(const uint8_t *) front, n, T.qlevel, qflag));
			if ((rc = dc_compact(D, qflag, T.nq, qlist, nsel, &m, st)) != GC_OK)
				return rc;
			if (m == 0)
				break;
			rounds++;
			/* the listed nodes of each chunk of lists */
			if (L.cut.size() == 2)
			{
				qs_cut[0] = 0;
				qs_cut[1] = m;
			}
			else
			{
				std::vector<int> qhost((size_t) m);

				DB_CK(cudaMemcpyAsync(qhost.data(), qlist, sizeof(int) * (size_t) m,
									  cudaMemcpyDeviceToHost, D.s));
				DB_CK(cudaStreamSynchronize(D.s));
				db_tree_cuts(L, qhost.data(), m, qs_cut.data());
			}
			A.front = front;
			A.next = next;
			if ((rc = db_tree_pass<TR_EXPAND>(D, ctx, T, L, A, qlist, qs_cut.data(), st)) != GC_OK)
				return rc;
			/* the claimed points are the next round's seeds */
			DB_CK(cudaMemsetAsync(front, 0, (size_t) n, D.s));
			{
				uint8_t    *t = front;

				front = next;
				next = t;
			}
		}

		/* the generation's chains merged through the collision matrix */
		DB_CK(gc_launch(k_dc_merge, (int64_t) G * G / 32, DB_THREADS, DB_THREADS, D.s,
						(const unsigned *) colmat, G, cpar));
		DB_CK(gc_launch(k_dc_chain_root, g, DB_THREADS, DB_THREADS, D.s, cpar, (int) g,
						base, croot));
		base += (int) g;
		if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
			return rc;
	}
	DB_CK(cudaMemcpyAsync(&bad_h, bad, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	DB_CK(gc_launch(k_dc_rp, n, DB_THREADS, DB_THREADS, D.s, (const uint8_t *) A.core,
					(const int *) A.state, (const int *) croot, (const int *) first, n, rp));
	if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	if (bad_h)
		return gc_fail(st, GC_EDEVICE, "GPU DBSCAN (dclust): a chain met an older generation's chain");
	db_phases.chains = base;
	db_phases.generations = generations;
	db_phases.rounds = rounds;
	db_trace("dclust chains", base);
	return GC_OK;
}
