/*-------------------------------------------------------------------------
 *
 * args.c
 *	  Reading the arguments of the clustering functions: the NULL checks
 *	  against an algorithm's signature, and the checks every algorithm's
 *	  reader shares (device, metric, names, counts).  Each algorithm's
 *	  signature and reader are in its folder (kmeans/kmeans_args.c ...);
 *	  see common/args.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "common/args.h"

void
gc_glue_check_nargs(FunctionCallInfo fcinfo, const GcSignature *sig)
{
	if (PG_NARGS() != sig->nargs)
		elog(ERROR, "function %s called with %d arguments, declared with %d",
			 get_func_name(fcinfo->flinfo->fn_oid), PG_NARGS(), sig->nargs);
}

/*
 * The SQL functions are not STRICT (device defaults to NULL), so required
 * arguments are checked here: a NULL one is an error, never a silent empty
 * result.
 */
void
gc_glue_check_arg_null(const GcSignature *sig, int argno, bool isnull)
{
	if (isnull && !sig->arg[argno].nullable)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be NULL",
						sig->arg[argno].name)));
}

void
gc_glue_args_of_call(FunctionCallInfo fcinfo, const GcSignature *sig,
					 GcArgs *a)
{
	/* the keyed form: id_type (its value unused, NULL as a rule) after the source */
	bool		keyed = PG_NARGS() == sig->nargs + 1;

	if (!keyed)
		gc_glue_check_nargs(fcinfo, sig);
	a->sig = sig;
	a->id_type = InvalidOid;
	if (keyed)
	{
		a->id_type = get_fn_expr_argtype(fcinfo->flinfo, GC_ARG_ID_TYPE);
		if (!OidIsValid(a->id_type))
			elog(ERROR, "could not determine the type of argument id_type");
	}
	for (int i = 0; i < sig->nargs; i++)
	{
		int			argno = keyed && i >= GC_ARG_ID_TYPE ? i + 1 : i;

		a->isnull[i] = PG_ARGISNULL(argno);
		a->value[i] = PG_GETARG_DATUM(argno);
		gc_glue_check_arg_null(sig, i, a->isnull[i]);
	}
}

/* A device argument: NULL means the gpuclust.device setting. */
gc_device
gc_glue_device(Datum value, bool isnull)
{
	char	   *s;
	gc_device	dev;

	if (isnull)
		return (gc_device) gpuclust_device;

	s = text_to_cstring(DatumGetTextPP(value));
	if (!gc_parse_device(s, &dev))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid device \"%s\"", s),
				 errhint("Valid devices are \"auto\", \"cpu\" and \"gpu\"; NULL uses the gpuclust.device setting.")));
	pfree(s);
	return dev;
}

/* The device argument at argno. */
gc_device
gc_glue_arg_device(const GcArgs *a, int argno)
{
	return gc_glue_device(a->value[argno], a->isnull[argno]);
}

/* metric text, by pgvector's names, or an ERROR */
gc_metric
gc_glue_parse_metric(Datum value)
{
	char	   *s = text_to_cstring(DatumGetTextPP(value));

	if (pg_strcasecmp(s, "euclidean") == 0)
		return GC_METRIC_EUCLIDEAN;
	if (pg_strcasecmp(s, "cosine") == 0)
		return GC_METRIC_COSINE;
	if (pg_strcasecmp(s, "inner_product") == 0)
		return GC_METRIC_INNER_PRODUCT;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid metric \"%s\"", s),
			 errhint("Valid metrics are \"euclidean\", \"cosine\" and \"inner_product\" (pgvector's names).")));
	pg_unreachable();
}

/* ERROR (22023): s is not a valid what; hint lists the valid ones */
void
gc_glue_invalid_name(const char *what, const char *s, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid %s \"%s\"", what, s),
			 errhint("%s", hint)));
	pg_unreachable();
}

/*
 * A call whose parameters the CPU cannot run (st's message: DBSCAN's
 * dclust, affinity propagation in float4) asked for the CPU, by the
 * device argument at argno or, when that is NULL, by gpuclust.device
 * (requested): 0A000, before the source runs.  other is the parameter's
 * value that runs everywhere, for the hint.
 */
void
gc_glue_refuse_on_cpu(const GcArgs *a, int argno, gc_device requested,
			  const gc_status *st, const char *other)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s", st->message),
			 a->isnull[argno] ?
			 errdetail("device is NULL, and the gpuclust.device setting is \"%s\".",
					   gc_device_name(requested)) :
			 errdetail("device is \"%s\".", gc_device_name(requested)),
			 errhint("Use device => 'gpu' or 'auto'%s, or %s.",
					 a->isnull[argno] ? " (or set gpuclust.device to one of them)" : "",
					 other)));
}

/* ERROR unless argument argno of a, whose value is value, is at least 1 */
void
gc_glue_check_at_least_1(const GcArgs *a, int argno, int64 value)
{
	if (value < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at least 1", a->sig->arg[argno].name)));
}

void
gc_glue_check_k_rows(int k, int64 n, const char *hint)
{
	gc_glue_check_rows_for("k", k, n, hint);
}

void
gc_glue_check_rows_for(const char *name, int64 value, int64 n,
					   const char *hint)
{
	if (value <= n)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must not exceed the number of rows with features", name),
			 errdetail_plural("%s is %lld, but the source query returned %lld row with non-NULL features.",
							  "%s is %lld, but the source query returned %lld rows with non-NULL features.",
							  (unsigned long) n,
							  name, (long long) value, (long long) n),
			 hint ? errhint("%s", hint) : 0));
}
