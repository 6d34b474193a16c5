/*
 * kmeans_assign_kernel.h — body of the k-means assignment kernel, included
 * by kmeans_assign.c once per vector width.  Define before including:
 *   KM_W       lanes (floats) per vector
 *   KM_FN      function name
 *   KM_TARGET  function attributes (e.g. the target ISA)
 *
 * Rows are taken 4 at a time; centres are read KM_W at a time from the
 * transposed, NaN-padded copy ct (d rows of kpad floats, 64-byte aligned),
 * so the loop over centres is a plain vector loop.  Each distance is summed
 * over dimensions in order with separate multiply and add — exactly the
 * float32 gc_dist2, so a scalar argmin over the same centres gives the same
 * labels.  Every lane keeps its own best (strict <, so the first minimum),
 * and the lanes are combined by (value, index): ties go to the lowest index.
 * NaN padding never compares less.  The listed form (KM_FN_list) also
 * keeps each row's second smallest distance, for the bounds of
 * gc_km_assign_bounded.
 */

/*
 * The nearest centres of the np (1 to 4) rows x[0..np-1]: lab[p] and its
 * distance best[p]; when sec is not NULL, sec[p] the second smallest
 * distance over every centre (the best again when two centres tie).
 * Inlined with sec a constant, so the plain assignment keeps no second.
 */
KM_TARGET static inline __attribute__((always_inline)) void
KM_GLUE(KM_FN, _rows) (const float *const x[4], int np, int d,
					   const float *ct, int kpad, int32_t *lab, float *best,
					   float *sec)
{
	typedef float vf __attribute__((vector_size(KM_W * sizeof(float))));
	typedef int32_t vi __attribute__((vector_size(KM_W * sizeof(int32_t))));
	const int	nv = kpad / KM_W;
	const float *x0 = x[0],
			   *x1 = x[1],
			   *x2 = x[2],
			   *x3 = x[3];
	vf			b0 = (vf) {} + INFINITY,
				b1 = b0,
				b2 = b0,
				b3 = b0,
				s0 = b0,
				s1 = b0,
				s2 = b0,
				s3 = b0;
	vi			l0 = (vi) {},
				l1 = l0,
				l2 = l0,
				l3 = l0;
	vi			iota,
				ci;

	for (int l = 0; l < KM_W; l++)
		iota[l] = l;
	ci = iota;
	for (int v = 0; v < nv; v++, ci += KM_W)
	{
		const float *cc = ct + v * KM_W;
		vf			c = *(const vf *) cc;
		/* (c - x)² == (x - c)² bit for bit: IEEE subtraction is symmetric. */
		vf			a0 = GC_L2_FIRST_V(c, x0[0]),
					a1 = GC_L2_FIRST_V(c, x1[0]),
					a2 = GC_L2_FIRST_V(c, x2[0]),
					a3 = GC_L2_FIRST_V(c, x3[0]);
		vi			m0,
					m1,
					m2,
					m3;

		for (int j = 1; j < d; j++)
		{
			c = *(const vf *) (cc + (size_t) j * kpad);
			a0 = GC_L2_STEP_V(a0, c, x0[j]);
			a1 = GC_L2_STEP_V(a1, c, x1[j]);
			a2 = GC_L2_STEP_V(a2, c, x2[j]);
			a3 = GC_L2_STEP_V(a3, c, x3[j]);
		}
		m0 = a0 < b0;
		m1 = a1 < b1;
		m2 = a2 < b2;
		m3 = a3 < b3;
		if (sec != NULL)
		{
			/* the second: the smaller of the old second and the loser */
			vf			o0 = (vf) (((vi) b0 & m0) | ((vi) a0 & ~m0)),
						o1 = (vf) (((vi) b1 & m1) | ((vi) a1 & ~m1)),
						o2 = (vf) (((vi) b2 & m2) | ((vi) a2 & ~m2)),
						o3 = (vf) (((vi) b3 & m3) | ((vi) a3 & ~m3));
			vi			n0 = o0 < s0,
						n1 = o1 < s1,
						n2 = o2 < s2,
						n3 = o3 < s3;

			s0 = (vf) (((vi) o0 & n0) | ((vi) s0 & ~n0));
			s1 = (vf) (((vi) o1 & n1) | ((vi) s1 & ~n1));
			s2 = (vf) (((vi) o2 & n2) | ((vi) s2 & ~n2));
			s3 = (vf) (((vi) o3 & n3) | ((vi) s3 & ~n3));
		}
		b0 = (vf) (((vi) a0 & m0) | ((vi) b0 & ~m0));
		b1 = (vf) (((vi) a1 & m1) | ((vi) b1 & ~m1));
		b2 = (vf) (((vi) a2 & m2) | ((vi) b2 & ~m2));
		b3 = (vf) (((vi) a3 & m3) | ((vi) b3 & ~m3));
		l0 = (ci & m0) | (l0 & ~m0);
		l1 = (ci & m1) | (l1 & ~m1);
		l2 = (ci & m2) | (l2 & ~m2);
		l3 = (ci & m3) | (l3 & ~m3);
	}

	/* Combine lanes: minimum value, then the lowest index holding it. */
	for (int p = 0; p < np; p++)
	{
		vf			b = p == 0 ? b0 : p == 1 ? b1 : p == 2 ? b2 : b3;
		vi			li = p == 0 ? l0 : p == 1 ? l1 : p == 2 ? l2 : l3;

#if defined(__GNUC__) && !defined(__clang__)
		vf			m = b;
		vi			cand,
					mi;

		for (int s = KM_W / 2; s >= 1; s /= 2)
		{
			vf			o = __builtin_shuffle(m, iota ^ s);
			vi			lt = o < m;

			m = (vf) (((vi) o & lt) | ((vi) m & ~lt));
		}
		mi = b == m;
		cand = (li & mi) | (((vi) {} + INT32_MAX) & ~mi);
		for (int s = KM_W / 2; s >= 1; s /= 2)
		{
			vi			o = __builtin_shuffle(cand, iota ^ s);
			vi			lt = o < cand;

			cand = (o & lt) | (cand & ~lt);
		}
		lab[p] = cand[0];
		best[p] = m[0];
		if (sec != NULL)
		{
			/* every lane's second, and every lane's best but the winner's
			 * (its lane holds the winning centre: lanes hold distinct ones) */
			vf			sv = p == 0 ? s0 : p == 1 ? s1 : p == 2 ? s2 : s3;
			vi			w = li == ((vi) {} + lab[p]);
			vf			o = (vf) (((vi) ((vf) {} + INFINITY) & w) | ((vi) b & ~w));
			vi			lt = o < sv;

			sv = (vf) (((vi) o & lt) | ((vi) sv & ~lt));
			for (int s = KM_W / 2; s >= 1; s /= 2)
			{
				vf			q = __builtin_shuffle(sv, iota ^ s);

				lt = q < sv;
				sv = (vf) (((vi) q & lt) | ((vi) sv & ~lt));
			}
			sec[p] = sv[0];
		}
#else
		lab[p] = li[0];
		best[p] = b[0];
		for (int l = 1; l < KM_W; l++)
			if (b[l] < best[p] || (b[l] == best[p] && li[l] < lab[p]))
			{
				best[p] = b[l];
				lab[p] = li[l];
			}
		if (sec != NULL)
		{
			/* every lane's second, and every lane's best but one holding
			 * the minimum (another lane holding it too is a tie) */
			vf			sv = p == 0 ? s0 : p == 1 ? s1 : p == 2 ? s2 : s3;
			float		second = INFINITY;
			bool		skipped = false;

			for (int l = 0; l < KM_W; l++)
			{
				if (sv[l] < second)
					second = sv[l];
				if (b[l] == best[p] && !skipped)
					skipped = true;
				else if (b[l] < second)
					second = b[l];
			}
			sec[p] = second;
		}
#endif
	}
}

KM_TARGET static int64_t
KM_FN(const float *X, int64_t i0, int64_t i1, int d, const float *ct,
	  int kpad, int32_t *labels, float *d2)
{
	int64_t		changed = 0;

	for (int64_t i = i0; i < i1; i += 4)
	{
		const int	np = i1 - i < 4 ? (int) (i1 - i) : 4;
		/* Short tail: repeat the last row; its extra results are dropped. */
		const float *const x[4] = {
			X + i * d,
			X + (i + (np > 1 ? 1 : 0)) * d,
			X + (i + (np > 2 ? 2 : np - 1)) * d,
			X + (i + (np > 3 ? 3 : np - 1)) * d,
		};
		int32_t		lab[4];
		float		best[4];

		KM_GLUE(KM_FN, _rows) (x, np, d, ct, kpad, lab, best, NULL);
		for (int p = 0; p < np; p++)
		{
			changed += labels[i + p] != lab[p];
			labels[i + p] = lab[p];
			if (d2 != NULL)
				d2[i + p] = best[p];
		}
	}
	return changed;
}

/*
 * The same for the rows listed in rows[0..m-1], with each one's second
 * smallest distance in sec[q], q its place in the list.
 */
KM_TARGET static int64_t
KM_GLUE(KM_FN, _list) (const float *X, const int64_t *rows, int64_t m, int d,
					   const float *ct, int kpad, int32_t *labels, float *d2,
					   float *sec)
{
	int64_t		changed = 0;

	for (int64_t q = 0; q < m; q += 4)
	{
		const int	np = m - q < 4 ? (int) (m - q) : 4;
		const int64_t r[4] = {
			rows[q],
			rows[q + (np > 1 ? 1 : 0)],
			rows[q + (np > 2 ? 2 : np - 1)],
			rows[q + (np > 3 ? 3 : np - 1)],
		};
		const float *const x[4] = {X + r[0] * d, X + r[1] * d, X + r[2] * d, X + r[3] * d};
		int32_t		lab[4];
		float		best[4],
					second[4];

		KM_GLUE(KM_FN, _rows) (x, np, d, ct, kpad, lab, best, second);
		for (int p = 0; p < np; p++)
		{
			changed += labels[r[p]] != lab[p];
			labels[r[p]] = lab[p];
			d2[r[p]] = best[p];
			sec[q + p] = second[p];
		}
	}
	return changed;
}
