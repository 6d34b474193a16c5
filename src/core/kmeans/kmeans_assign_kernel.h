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
 * NaN padding never compares less.
 */

KM_TARGET static int64_t
KM_FN(const float *X, int64_t i0, int64_t i1, int d, const float *ct,
	  int kpad, int32_t *labels, float *d2)
{
	typedef float vf __attribute__((vector_size(KM_W * sizeof(float))));
	typedef int32_t vi __attribute__((vector_size(KM_W * sizeof(int32_t))));
	const int	nv = kpad / KM_W;
	int64_t		changed = 0;
	vi			iota;

	for (int l = 0; l < KM_W; l++)
		iota[l] = l;

	for (int64_t i = i0; i < i1; i += 4)
	{
		const int	np = i1 - i < 4 ? (int) (i1 - i) : 4;
		/* Short tail: repeat the last row; its extra results are dropped. */
		const float *x0 = X + i * d;
		const float *x1 = X + (i + (np > 1 ? 1 : 0)) * d;
		const float *x2 = X + (i + (np > 2 ? 2 : np - 1)) * d;
		const float *x3 = X + (i + (np > 3 ? 3 : np - 1)) * d;
		vf			b0 = (vf) {} + INFINITY,
					b1 = b0,
					b2 = b0,
					b3 = b0;
		vi			l0 = (vi) {},
					l1 = l0,
					l2 = l0,
					l3 = l0;
		vi			ci = iota;

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
			int32_t		lab;
			float		best;

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
			lab = cand[0];
			best = m[0];
#else
			lab = li[0];
			best = b[0];
			for (int l = 1; l < KM_W; l++)
				if (b[l] < best || (b[l] == best && li[l] < lab))
				{
					best = b[l];
					lab = li[l];
				}
#endif
			changed += labels[i + p] != lab;
			labels[i + p] = lab;
			if (d2 != NULL)
				d2[i + p] = best;
		}
	}
	return changed;
}
