/*
 * hdbscan_linkage.cu — the single-linkage tree of the minimum spanning
 * tree on the GPU: from the n - 1 edges sorted by (w, a, b), node n + i
 * for edge i, joining the current cluster of its a (left) and that of its
 * b (right), with their sizes: bit for bit the union-find's of
 * hdbscan_tree.c (only the edges' order, their ranks, decides it).
 *
 * In the tree's terms (D): a row's parent is its least edge (the first
 * that touches it); an edge's parent is the least later edge touching its
 * component.  The work goes by Borůvka's contractions of the spanning tree
 * itself, then back down:
 *
 *  1. contraction, level l = 0, 1, ...: each supervertex s (a component,
 *     named by one of its rows; level 0: the rows) picks its least incident
 *     edge minE[s]; the picked edges M_l are contracted (the supervertices
 *     hook along them, pointer jumping to the new roots), the others
 *     renamed to the new supervertices.  An edge picked by both its ends
 *     is its new supervertex's least edge, e0; every other edge of M_l is
 *     picked by one end, z.  Each level at least halves the supervertices.
 *
 *  2. expansion, l from the top down: D_l, the single-linkage tree of the
 *     level-l supervertices (its leaves) and the edges of levels >= l,
 *     from D_{l+1}.  Within a level-(l+1) supervertex S the edges of M_l
 *     grow heavier away from e0(S) (each picked its lighter end's least),
 *     so every one of them lies on S's path to the root of D_l, at its
 *     rank: edge g sits on the link x -> y of D_{l+1} above S with
 *     rank(x) < g < rank(y) (found by binary lifting over D_{l+1}; the
 *     leaf S has rank -1).  The edges a link receives, in rank order, form
 *     a chain from x up to y; z, the supervertex that picked g, becomes a
 *     leaf child of g (e0(S), at the bottom of S's own link, has two).
 *     Each node keeps its parent and its side in it (0: the side of the
 *     parent's a, 1: of its b), so that a chain slips in between a node
 *     and its parent: the chain's top takes x's place, x goes under the
 *     chain's bottom.
 *
 *  3. the children from (parent, side), and the sizes from an Euler tour
 *     of the tree: a node's rows are the leaves its tour passes between
 *     its entry and its exit.  The tour is list-ranked by sublists: one
 *     thread walks from each of about 1 in HL_SPLIT events (the splitters)
 *     to the next, the short list of splitters is ranked by pointer
 *     jumping (Wyllie), and each event adds its splitter's sum.
 *
 * Work O(n log n) (the lifting), memory about 100 bytes a row (the
 * lifting's tables at most 4 (log2 n + 2) bytes a row of the largest
 * level).  Errors that only a bad input could make (a supervertex with no
 * edge, a level that does not contract, a node with a child too many)
 * set a flag: GC_EDEVICE, never a hang.  The host reads each
 * contraction level's counts, polling the cancel flags while it waits;
 * the expansion (its sizes known from those counts) and the tour are
 * queued whole, with one wait at their end.
 */
#include <utility>

#include <cub/device/device_radix_sort.cuh>

#include "hdbscan_gpu.cuh"

#pragma GCC visibility push(hidden)

#define HL_NONE 0xffffffffu
#define HL_MAX_LEVELS 40		/* at most 31 happen (n < 2^31) */

/*
 * One splitter in about HL_SPLIT events of the tour.  The longest walk
 * grows as HL_SPLIT ln(E / HL_SPLIT) (the splitters fall on the list as at
 * random: about 380 steps at 4M events), the splitters' pointer jumping as
 * (E / HL_SPLIT) log2(E / HL_SPLIT); 32 keeps both a small part of the
 * whole tour's pointer jumping.
 */
#define HL_SPLIT 32
#define HL_SPLITTER 0x80000000u	/* in own: the event is its sublist's splitter */

enum
{
	HL_ERR_NOEDGE = 1,			/* a supervertex without an edge */
	HL_ERR_CHAIN = 2,			/* a chain whose bottom is not its e0 */
	HL_ERR_CHILD = 4,			/* a side filled twice, or left empty */
	HL_ERR_ROOT = 8				/* a root other than the last edge's node */
};

/* The arrays of the work; device memory. */
struct hl_work
{
	int			n;
	const unsigned long long *eab;	/* m: the sorted edges' pairs */
	int		   *su,
			   *sv;				/* m: the supervertices of a and b */
	uint8_t    *zside;			/* m: the side of z (0: a's, 1: b's), 2: e0 */
	int8_t	   *elev;			/* m: the edge's level, -1 not yet */
	int		   *egrp;			/* m: the edges by level */
	int		   *act,
			   *act2;			/* the edges not contracted yet */
	int		   *minE;			/* n: a supervertex's least edge */
	int		   *hook;			/* n: its new supervertex */
	int		   *alive,
			   *alive2;			/* the supervertices of the level */
	/* each level's supervertices (2n at most): row, least edge, side, up */
	int		   *ls,
			   *le,
			   *lup;
	uint8_t    *lside;
	unsigned   *par;			/* n + m: each node's parent (n + edge) */
	uint8_t    *side;			/* n + m: its side in it */
	unsigned   *cnt;			/* [0] supervertices, [1] edges, [2] M_l, [3] errors */
};

/* ---- 1. contraction ---- */

__global__ void
k_hl_init(hl_work W, int m)
{
	const int	e = blockIdx.x * blockDim.x + threadIdx.x;

	if (e < W.n)
	{
		W.alive[e] = e;
		W.minE[e] = INT32_MAX;
	}
	if (e < m)
	{
		W.su[e] = (int) (W.eab[e] >> 32);
		W.sv[e] = (int) (W.eab[e] & 0xffffffffu);
		W.elev[e] = -1;
		W.act[e] = e;
	}
}

/* Each supervertex's least incident edge. */
__global__ void
k_hl_least(hl_work W, int ne)
{
	const int	j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= ne)
		return;
	const int	e = W.act[j];

	atomicMin(&W.minE[W.su[e]], e);
	atomicMin(&W.minE[W.sv[e]], e);
}

/* The picked edges: their level, z's side, their place in egrp. */
__global__ void
k_hl_pick(hl_work W, int ne, int l, int grp0)
{
	const int	j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= ne)
		return;
	const int	e = W.act[j];
	const bool	pu = W.minE[W.su[e]] == e,
				pv = W.minE[W.sv[e]] == e;

	if (!pu && !pv)
		return;
	W.elev[e] = (int8_t) l;
	W.zside[e] = pu && pv ? 2 : pu ? 0 : 1;
	W.egrp[grp0 + (int) atomicAdd(&W.cnt[2], 1u)] = e;
}

/*
 * Each supervertex hangs under the other end of its least edge (of two
 * that picked the same edge, the lower stays a root); its list entry.
 */
__global__ void
k_hl_hook(hl_work W, int na, int off)
{
	const int	k = blockIdx.x * blockDim.x + threadIdx.x;

	if (k >= na)
		return;
	const int	s = W.alive[k],
				e = W.minE[s];

	if (e == INT32_MAX)
	{
		atomicOr(&W.cnt[3], HL_ERR_NOEDGE);
		W.hook[s] = s;
		return;
	}
	const int	o = W.su[e] == s ? W.sv[e] : W.su[e];

	W.hook[s] = W.minE[o] == e && s < o ? s : o;
	W.ls[off + k] = s;
	W.le[off + k] = e;
	W.lside[off + k] = W.su[e] == s ? 0 : 1;
}

/*
 * One step of pointer jumping (as hdbscan_boruvka.cu's k_hb_jump: a value
 * read while another thread writes it is old or new, both on the way to
 * the root, so each launch at least halves every path).
 */
__global__ void
k_hl_jump(hl_work W, int na)
{
	const int	k = blockIdx.x * blockDim.x + threadIdx.x;

	if (k >= na)
		return;
	volatile int *h = W.hook;
	const int	s = W.alive[k],
				p = h[s],
				pp = h[p];

	if (pp != p)
		h[s] = pp;
}

/* Each supervertex's new one; the roots are the next level's. */
__global__ void
k_hl_up(hl_work W, int na, int off)
{
	const int	k = blockIdx.x * blockDim.x + threadIdx.x;

	if (k >= na)
		return;
	const int	s = W.alive[k],
				r = W.hook[s];

	W.lup[off + k] = r;
	W.minE[s] = INT32_MAX;
	if (r == s)
		W.alive2[atomicAdd(&W.cnt[0], 1u)] = s;
}

/* The edges left, renamed to the new supervertices. */
__global__ void
k_hl_rename(hl_work W, int ne)
{
	const int	j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= ne)
		return;
	const int	e = W.act[j];

	if (W.elev[e] >= 0)
		return;
	W.su[e] = W.hook[W.su[e]];
	W.sv[e] = W.hook[W.sv[e]];
	W.act2[atomicAdd(&W.cnt[1], 1u)] = e;
}

/* ---- 2. expansion ---- */

/* D_{l+1}'s nodes, compact: the leaves (supervertices), then the edges. */
__global__ void
k_hl_nodes(hl_work W, int nleaf, int loff, int nint, int goff,
		   int *cidx, unsigned *cnode, int *crank)
{
	const int	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= nleaf + nint)
		return;
	unsigned	x;

	if (i < nleaf)
	{
		x = (unsigned) W.ls[loff + i];
		crank[i] = -1;
	}
	else
	{
		const int	e = W.egrp[goff + i - nleaf];

		x = (unsigned) W.n + (unsigned) e;
		crank[i] = e;
	}
	cnode[i] = x;
	cidx[x] = i;
}

/* The lifting's first table: each node's parent, compact. */
__global__ void
k_hl_up0(hl_work W, int N, const int *cidx, const unsigned *cnode,
		 unsigned *up0)
{
	const int	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= N)
		return;
	const unsigned p = W.par[cnode[i]];

	up0[i] = p == HL_NONE ? HL_NONE : (unsigned) cidx[p];
}

/* up_k = up_{k-1} twice. */
__global__ void
k_hl_upk(int N, const unsigned *prev, unsigned *next)
{
	const int	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= N)
		return;
	const unsigned p = prev[i];

	next[i] = p == HL_NONE ? HL_NONE : prev[p];
}

/* Each supervertex of level l: its level-(l+1) one. */
__global__ void
k_hl_upmap(hl_work W, int na, int off, int *upmap)
{
	const int	k = blockIdx.x * blockDim.x + threadIdx.x;

	if (k < na)
		upmap[W.ls[off + k]] = W.lup[off + k];
}

/*
 * Each edge g of M_l: the link of D_{l+1} it sits on, from the leaf of its
 * supervertex up to the last node below rank g, as the key (x << 32 | g).
 */
__global__ void
k_hl_climb(hl_work W, int cnt, int goff, int K, int N, const int *upmap,
		   const int *cidx, const unsigned *cnode, const int *crank,
		   const unsigned *up, unsigned long long *key)
{
	const int	j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= cnt)
		return;
	const int	g = W.egrp[goff + j];
	unsigned	x = (unsigned) cidx[upmap[W.su[g]]];

	for (int k = K - 1; k >= 0; k--)
	{
		const unsigned y = up[(int64_t) k * N + x];

		if (y != HL_NONE && crank[y] < g)
			x = y;
	}
	key[j] = ((unsigned long long) cnode[x] << 32) | (unsigned) g;
}

/* A chain's top takes its link's place under y (read before any change). */
__global__ void
k_hl_top(hl_work W, int cnt, const unsigned long long *key)
{
	const int	j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= cnt)
		return;
	const unsigned x = (unsigned) (key[j] >> 32),
				g = (unsigned) key[j];

	if (j + 1 < cnt && (unsigned) (key[j + 1] >> 32) == x)
		return;
	W.par[W.n + g] = W.par[x];
	W.side[W.n + g] = W.side[x];
}

/*
 * The rest of each chain: each edge under the next (on the next's side
 * away from its z), and x under the chain's bottom.
 */
__global__ void
k_hl_chain(hl_work W, int cnt, const unsigned long long *key)
{
	const int	j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= cnt)
		return;
	const unsigned x = (unsigned) (key[j] >> 32),
				g = (unsigned) key[j];
	const bool	first = j == 0 || (unsigned) (key[j - 1] >> 32) != x;

	if (j + 1 < cnt && (unsigned) (key[j + 1] >> 32) == x)
	{
		const unsigned h = (unsigned) key[j + 1];

		W.par[W.n + g] = (unsigned) W.n + h;
		W.side[W.n + g] = (uint8_t) (1 - W.zside[h]);
	}
	/* a leaf's link starts at its e0, and an e0 only there */
	if ((first && x < (unsigned) W.n) != (W.zside[g] == 2))
		atomicOr(&W.cnt[3], HL_ERR_CHAIN);
	if (first && x >= (unsigned) W.n)
	{
		W.par[x] = (unsigned) W.n + g;
		W.side[x] = (uint8_t) (1 - W.zside[g]);
	}
}

/* The leaves of D_l: each supervertex under its least edge. */
__global__ void
k_hl_leaves(hl_work W, int na, int off)
{
	const int	k = blockIdx.x * blockDim.x + threadIdx.x;

	if (k >= na)
		return;
	const int	s = W.ls[off + k];

	W.par[s] = (unsigned) W.n + (unsigned) W.le[off + k];
	W.side[s] = W.lside[off + k];
}

/* ---- 3. children and sizes ---- */

__global__ void
k_hl_children(hl_work W, int64_t N, unsigned *child)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= N)
		return;
	const unsigned p = W.par[x];

	if (p == HL_NONE)
		return;
	const int64_t slot = 2 * (int64_t) (p - (unsigned) W.n) + W.side[x];

	if (atomicExch(&child[slot], (unsigned) x) != HL_NONE)
		atomicOr(&W.cnt[3], HL_ERR_CHILD);
}

/*
 * The Euler tour: event 2x enters node x, 2x + 1 leaves it; entering a
 * row counts 1.  After an edge's left subtree comes its right, after its
 * right the edge's exit.
 */
__global__ void
k_hl_tour(hl_work W, int64_t N, const unsigned *child, unsigned *nxt,
		  int *val)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= N)
		return;
	const unsigned n = (unsigned) W.n;
	const unsigned p = W.par[x];

	if (x < n)
	{
		nxt[2 * x] = 2 * (unsigned) x + 1;
		val[2 * x] = 1;
	}
	else
	{
		const unsigned l = child[2 * (x - n)];

		if (l == HL_NONE || child[2 * (x - n) + 1] == HL_NONE)
			atomicOr(&W.cnt[3], HL_ERR_CHILD);
		nxt[2 * x] = l == HL_NONE ? HL_NONE : 2 * l;
		val[2 * x] = 0;
	}
	val[2 * x + 1] = 0;
	/* the list's head is the last edge's entry (hl_split) */
	if ((p == HL_NONE) != (x == N - 1))
		atomicOr(&W.cnt[3], HL_ERR_ROOT);
	if (p == HL_NONE)
		nxt[2 * x + 1] = HL_NONE;
	else if (W.side[x] == 0)
		nxt[2 * x + 1] = 2 * child[2 * (p - n) + 1];
	else
		nxt[2 * x + 1] = 2 * p + 1;
}

/*
 * The splitters of the tour's list ranking: the events t with pi(t) =
 * t * A mod E below ns0 = ceil(E / HL_SPLIT), numbered pi(t), and the
 * list's head (the root's entry, E - 2) as ns0 unless it is one already.
 * pi is a bijection of [0, E), so their count is known on the host; with
 * A prime to E and about 0.618 E, neighbouring and strided indices land far
 * apart, so the splitters fall on the list as at random whatever its order
 * (t % HL_SPLIT == 0 would never pick an exit, which are odd, and the
 * exits up a chain of right children follow one another).
 */
struct hl_split
{
	unsigned long long E,
				M;				/* floor((2^64 - 1) / E), for hl_mulmod */
	unsigned	A,
				Ainv,			/* A's inverse mod E */
				ns0,
				ns,				/* the splitters: ns0, or ns0 + 1 with the head */
				head;
};

/*
 * a b mod E (a, b < E < 2^32) by Barrett's reduction, a few multiplies
 * where % would call a division: the quotient estimate is floor(ab / E)
 * or one less, so one subtraction at most corrects it.
 */
__device__ __forceinline__ unsigned
hl_mulmod(const hl_split &P, unsigned a, unsigned b)
{
	const unsigned long long x = (unsigned long long) a * b,
				r = x - __umul64hi(x, P.M) * P.E;

	return (unsigned) (r >= P.E ? r - P.E : r);
}

/* Event t's splitter, or HL_NONE. */
__device__ __forceinline__ unsigned
hl_split_id(const hl_split &P, unsigned t)
{
	const unsigned p = hl_mulmod(P, t, P.A);

	return p < P.ns0 ? p : t == P.head ? P.ns0 : HL_NONE;
}

/*
 * Each splitter's sublist, walked up to the next splitter or the end:
 * each event's splitter into own (with HL_SPLITTER on the splitter's own),
 * and, in val's place but the splitter's, the sum of val from the splitter
 * to the event, the event excluded; the sublist's sum and the next
 * splitter into stot and snxt.  Each event but the splitters is read and
 * written by its walk only.  A tour flagged bad is not walked (a child
 * twice could lead a walk into a cycle without a splitter); a good one's
 * events have one predecessor each, so each walk ends.
 */
__global__ void
k_hl_walk(hl_split P, const unsigned *err, const unsigned *nxt, int *val,
		  unsigned *own, unsigned *snxt, int *stot)
{
	const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= P.ns)
		return;
	if (*err != 0)
	{
		snxt[j] = HL_NONE;
		stot[j] = 0;
		return;
	}
	const unsigned t = j == P.ns0 ? P.head : hl_mulmod(P, j, P.Ainv);
	unsigned	u = nxt[t],
				k = HL_NONE;
	int			acc = val[t];

	own[t] = j | HL_SPLITTER;
	while (u < P.E && (k = hl_split_id(P, u)) == HL_NONE)
	{
		const int	v = val[u];

		own[u] = j;
		val[u] = acc;
		acc += v;
		u = nxt[u];
	}
	snxt[j] = k;
	stot[j] = acc;
}

/* One step of list ranking: each splitter's sum to the tour's end doubles. */
__global__ void
k_hl_rank(int64_t E, const unsigned *nxt, const int *val, unsigned *nxt2,
		  int *val2)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= E)
		return;
	const unsigned t = nxt[i];

	if (t == HL_NONE)
	{
		nxt2[i] = HL_NONE;
		val2[i] = val[i];
	}
	else
	{
		nxt2[i] = nxt[t];
		val2[i] = val[i] + val[t];
	}
}

/*
 * Each event's sum of val to the tour's end: its splitter's, less the
 * sum before it in its sublist.  An event no walk passed (a tour flagged
 * bad) is left as it is.
 */
__global__ void
k_hl_sum(int64_t E, unsigned ns, const unsigned *own, const int *stot,
		 int *val)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= E)
		return;
	const unsigned k = own[i],
				s = k & ~HL_SPLITTER;

	if (s < ns)
		val[i] = (k & HL_SPLITTER) ? stot[s] : stot[s] - val[i];
}

/* The nodes out: children, their rows (entry's sum less exit's), w. */
__global__ void
k_hl_out(int n, const unsigned *child, const int *val,
		 const unsigned long long *ew, gc_linkage_node *out)
{
	const int	e = blockIdx.x * blockDim.x + threadIdx.x;

	if (e >= n - 1)
		return;
	const unsigned l = child[2 * e],
				r = child[2 * e + 1];

	out[e].left = l;
	out[e].right = r;
	out[e].lsize = val[2 * (int64_t) l] - val[2 * (int64_t) l + 1];
	out[e].rsize = val[2 * (int64_t) r] - val[2 * (int64_t) r + 1];
	out[e].w = hb_dbl(ew[e]);
}

/* ---- the host side ---- */

/* ceil(log2(x)) + 1 for x >= 1: the jumps that reach a root from depth x */
static int
hl_log_steps(int64_t x)
{
	int			k = 1;

	while (((int64_t) 1 << (k - 1)) < x)
		k++;
	return k;
}

static int64_t
hl_gcd(int64_t a, int64_t b)
{
	while (b != 0)
	{
		const int64_t r = a % b;

		a = b;
		b = r;
	}
	return a;
}

/* The splitters of a tour of E events whose head is head. */
static hl_split
hl_split_plan(int64_t E, unsigned head)
{
	hl_split	P;
	int64_t		a = (int64_t) ((double) E * 0.6180339887498949),
				r0 = E,
				r1,
				t0 = 0,
				t1 = 1;

	while (a < 1 || hl_gcd(a, E) != 1)
		a++;
	/* A's inverse mod E: extended Euclid */
	r1 = a;
	while (r1 != 0)
	{
		const int64_t q = r0 / r1,
					r2 = r0 - q * r1,
					t2 = t0 - q * t1;

		r0 = r1;
		r1 = r2;
		t0 = t1;
		t1 = t2;
	}
	P.E = (unsigned long long) E;
	P.M = ~0ULL / P.E;
	P.A = (unsigned) a;
	P.Ainv = (unsigned) (t0 < 0 ? t0 + E : t0);
	P.ns0 = (unsigned) ((E + HL_SPLIT - 1) / HL_SPLIT);
	P.head = head;
	P.ns = (unsigned) ((unsigned long long) head * P.A % P.E) < P.ns0 ?
		P.ns0 : P.ns0 + 1;
	return P;
}

size_t
hb_linkage_bytes(int64_t n)
{
	/*
	 * The expansion's, the most at once: per edge su, sv, egrp 4 each,
	 * zside and elev 1, the keys and the sort's other buffer 16; per node
	 * (2n) par 4, side 1, cidx 4; the level lists' 13 per entry (2n); per
	 * row upmap 4, and D_1's nodes (at most n: the rows pair up at level
	 * 0) cnode and crank 4 and the lifting's K tables 4; CUB's sort of the
	 * keys about 8 per edge.  (The contraction's lists of supervertices
	 * and edges and its hook, 24 a row, are gone by then; the tour's 3
	 * arrays of 4n events, 48 a row, and its splitters' 4 of 4n / HL_SPLIT,
	 * 2 a row, come after the lifting's.)
	 */
	const int64_t K = hl_log_steps(n);

	return (size_t) n * (size_t) (12 + 2 + 16 + 18 + 26 + 4 + 8 + 4 * K + 8) +
		((size_t) 16 << 20);
}

gc_code
hb_linkage(gc_dev &D, const gc_ctx *ctx, int n, const unsigned long long *ew,
		   const unsigned long long *eab, gc_linkage_node *out, unsigned **par,
		   uint8_t **side, gc_status *st)
{
	const int	m = n - 1;
	const int64_t N = (int64_t) n + m,
				E = 2 * N;
	hl_work		W;
	unsigned	cnt[4];
	int			lvl_off[HL_MAX_LEVELS + 2],
				grp_off[HL_MAX_LEVELS + 1];
	int			na = n,
				ne = m,
				L = 0,
				off = 0;
	int		   *cidx,
			   *crank,
			   *upmap;
	unsigned   *cnode,
			   *up,
			   *child,
			   *nxt,
			   *own,
			   *snxt,
			   *snxt2;
	int		   *val,
			   *stot,
			   *stot2;
	unsigned long long *key,
			   *key2;
	gc_code		rc;

	if (E >= (int64_t) HL_NONE)
		return gc_fail(st, GC_EDEVICE, "%s: too many rows for the single-linkage tree (%d)",
					   HB_WHO, n);
	memset(&W, 0, sizeof(W));
	W.n = n;
	W.eab = eab;
	HB_ALLOC(W.su, m);
	HB_ALLOC(W.sv, m);
	HB_ALLOC(W.zside, m);
	HB_ALLOC(W.elev, m);
	HB_ALLOC(W.egrp, m);
	HB_ALLOC(W.act, m);
	HB_ALLOC(W.act2, m);
	HB_ALLOC(W.minE, n);
	HB_ALLOC(W.hook, n);
	HB_ALLOC(W.alive, n);
	HB_ALLOC(W.alive2, n);
	HB_ALLOC(W.ls, 2 * (int64_t) n);
	HB_ALLOC(W.le, 2 * (int64_t) n);
	HB_ALLOC(W.lup, 2 * (int64_t) n);
	HB_ALLOC(W.lside, 2 * (int64_t) n);
	HB_ALLOC(W.par, N);
	HB_ALLOC(W.side, N);
	HB_ALLOC(W.cnt, 4);
	HB_CK(cudaMemsetAsync(W.cnt, 0, 4 * sizeof(unsigned), D.s));
	HB_CK(cudaMemsetAsync(W.par, 0xff, sizeof(unsigned) * (size_t) N, D.s));
	HB_CK(cudaMemsetAsync(W.side, 0, (size_t) N, D.s));
	HB_CK(gc_launch(k_hl_init, n, HB_THREADS, HB_THREADS, D.s, W, m));

	/* 1. contraction */
	grp_off[0] = 0;
	while (na > 1)
	{
		int			nm;

		if (L >= HL_MAX_LEVELS)
			return gc_fail(st, GC_EDEVICE, "%s: internal error: %d levels", HB_WHO, L);
		lvl_off[L] = off;
		HB_CK(cudaMemsetAsync(W.cnt, 0, 3 * sizeof(unsigned), D.s));
		HB_CK(gc_launch(k_hl_least, ne, HB_THREADS, HB_THREADS, D.s, W, ne));
		HB_CK(gc_launch(k_hl_pick, ne, HB_THREADS, HB_THREADS, D.s, W, ne, L, grp_off[L]));
		HB_CK(gc_launch(k_hl_hook, na, HB_THREADS, HB_THREADS, D.s, W, na, off));
		for (int j = hl_log_steps(na); j > 0; j--)
			HB_CK(gc_launch(k_hl_jump, na, HB_THREADS, HB_THREADS, D.s, W, na));
		HB_CK(gc_launch(k_hl_up, na, HB_THREADS, HB_THREADS, D.s, W, na, off));
		HB_CK(gc_launch(k_hl_rename, ne, HB_THREADS, HB_THREADS, D.s, W, ne));
		if ((rc = hb_read_counts(D, ctx, W.cnt, cnt, 4, 3, "the single-linkage tree", st)) != GC_OK)
			return rc;
		nm = (int) cnt[2];
		if ((int) cnt[0] < 1 || (int) cnt[0] >= na || nm != na - (int) cnt[0] ||
			(int) cnt[1] != ne - nm)
			return gc_fail(st, GC_EDEVICE, "%s: internal error: level %d of the single-linkage tree (%d -> %u supervertices, %d edges)",
						   HB_WHO, L, na, cnt[0], nm);
		off += na;
		grp_off[L + 1] = grp_off[L] + nm;
		std::swap(W.alive, W.alive2);
		std::swap(W.act, W.act2);
		na = (int) cnt[0];
		ne = (int) cnt[1];
		L++;
	}
	/* the top: one supervertex, the root of D_L, in the lists as level L */
	lvl_off[L] = off;
	HB_CK(cudaMemcpyAsync(W.ls + off, W.alive, sizeof(int), cudaMemcpyDeviceToDevice, D.s));
	lvl_off[L + 1] = off + 1;
	D.drop(W.act);
	D.drop(W.act2);
	D.drop(W.alive);
	D.drop(W.alive2);
	D.drop(W.minE);
	D.drop(W.hook);
	W.act = W.act2 = W.alive = W.alive2 = W.minE = W.hook = nullptr;

	/* 2. expansion */
	{
		const int	nl1 = L >= 1 ? lvl_off[2] - lvl_off[1] : 1;	/* level 1's supervertices */
		const int64_t Nmax = (int64_t) 2 * nl1;
		const int	Kmax = hl_log_steps(Nmax);

		HB_ALLOC(cidx, N);
		HB_ALLOC(cnode, Nmax);
		HB_ALLOC(crank, Nmax);
		HB_ALLOC(upmap, n);
		HB_ALLOC(up, (int64_t) Kmax * Nmax);
		HB_ALLOC(key, m);
		HB_ALLOC(key2, m);
	}
	for (int l = L - 1; l >= 0; l--)
	{
		const int	nleaf = lvl_off[l + 2] - lvl_off[l + 1],
					nint = m - grp_off[l + 1],
					NN = nleaf + nint,
					K = hl_log_steps(NN),
					cntl = grp_off[l + 1] - grp_off[l],
					nal = lvl_off[l + 1] - lvl_off[l];
		cub::DoubleBuffer<unsigned long long> kb(key, key2);
		size_t		bytes = 0;

		HB_CK(gc_launch(k_hl_nodes, NN, HB_THREADS, HB_THREADS, D.s, W, nleaf,
						lvl_off[l + 1], nint, grp_off[l + 1], cidx, cnode, crank));
		HB_CK(gc_launch(k_hl_up0, NN, HB_THREADS, HB_THREADS, D.s, W, NN,
						(const int *) cidx, (const unsigned *) cnode, up));
		for (int k = 1; k < K; k++)
			HB_CK(gc_launch(k_hl_upk, NN, HB_THREADS, HB_THREADS, D.s, NN,
							(const unsigned *) (up + (int64_t) (k - 1) * NN),
							up + (int64_t) k * NN));
		HB_CK(gc_launch(k_hl_upmap, nal, HB_THREADS, HB_THREADS, D.s, W, nal,
						lvl_off[l], upmap));
		HB_CK(gc_launch(k_hl_climb, cntl, HB_THREADS, HB_THREADS, D.s, W, cntl,
						grp_off[l], K, NN, (const int *) upmap, (const int *) cidx,
						(const unsigned *) cnode, (const int *) crank,
						(const unsigned *) up, key));
		HB_CK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, kb, cntl, 0, 64, D.s));
		HB_CK(D.scratch(bytes));
		bytes = D.cub_bytes;
		HB_CK(cub::DeviceRadixSort::SortKeys(D.cub_tmp, bytes, kb, cntl, 0, 64, D.s));
		HB_CK(gc_launch(k_hl_top, cntl, HB_THREADS, HB_THREADS, D.s, W, cntl,
						(const unsigned long long *) kb.Current()));
		HB_CK(gc_launch(k_hl_chain, cntl, HB_THREADS, HB_THREADS, D.s, W, cntl,
						(const unsigned long long *) kb.Current()));
		HB_CK(gc_launch(k_hl_leaves, nal, HB_THREADS, HB_THREADS, D.s, W, nal, lvl_off[l]));
	}
	for (void *a : {(void *) cidx, (void *) cnode, (void *) crank, (void *) upmap,
			(void *) up, (void *) key, (void *) key2, (void *) W.su, (void *) W.sv,
			(void *) W.elev, (void *) W.egrp, (void *) W.ls,
			(void *) W.le, (void *) W.lup, (void *) W.lside})
		D.drop(a);

	/* 3. children, the tour, the sizes */
	HB_ALLOC(child, 2 * (int64_t) m);
	HB_CK(cudaMemsetAsync(child, 0xff, sizeof(unsigned) * 2 * (size_t) m, D.s));
	HB_CK(gc_launch(k_hl_children, N, HB_THREADS, HB_THREADS, D.s, W, N, child));
	HB_ALLOC(nxt, E);
	HB_ALLOC(val, E);
	HB_ALLOC(own, E);
	HB_CK(gc_launch(k_hl_tour, N, HB_THREADS, HB_THREADS, D.s, W, N,
					(const unsigned *) child, nxt, val));
	{
		/* the head: the root's entry, the last edge's (k_hl_tour checks) */
		const hl_split P = hl_split_plan(E, (unsigned) (E - 2));

		HB_ALLOC(snxt, P.ns);
		HB_ALLOC(snxt2, P.ns);
		HB_ALLOC(stot, P.ns);
		HB_ALLOC(stot2, P.ns);
		HB_CK(gc_launch(k_hl_walk, P.ns, HB_THREADS, HB_THREADS, D.s, P,
						(const unsigned *) (W.cnt + 3), (const unsigned *) nxt,
						val, own, snxt, stot));
		for (int r = hl_log_steps(P.ns); r > 0; r--)
		{
			HB_CK(gc_launch(k_hl_rank, P.ns, HB_THREADS, HB_THREADS, D.s,
							(int64_t) P.ns, (const unsigned *) snxt,
							(const int *) stot, snxt2, stot2));
			std::swap(snxt, snxt2);
			std::swap(stot, stot2);
		}
		HB_CK(gc_launch(k_hl_sum, E, HB_THREADS, HB_THREADS, D.s, E, P.ns,
						(const unsigned *) own, (const int *) stot, val));
	}
	if ((rc = hb_read_counts(D, ctx, W.cnt, cnt, 4, 3, "the single-linkage tree", st)) != GC_OK)
		return rc;
	HB_CK(gc_launch(k_hl_out, m, HB_THREADS, HB_THREADS, D.s, n,
					(const unsigned *) child, (const int *) val, ew, out));
	for (void *a : {(void *) child, (void *) nxt, (void *) val, (void *) own,
			(void *) snxt, (void *) snxt2, (void *) stot, (void *) stot2,
			(void *) W.zside, (void *) W.cnt})
		D.drop(a);
	if (par != nullptr)
	{
		*par = W.par;
		*side = W.side;
	}
	else
	{
		D.drop(W.par);
		D.drop(W.side);
	}
	return GC_OK;
}

#pragma GCC visibility pop
