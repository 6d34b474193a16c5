/*-------------------------------------------------------------------------
 *
 * passes.c
 *	  What the distributed drivers share (distributed/passes.h): their passes, their
 *	  NULL checks, and the flat array states of their aggregates.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/dependency.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"

#include "distributed/passes.h"
#include "common/ingest.h"

static void
pass_context(void *arg)
{
	const GcPass *p = arg;

	if (p->round > 0)
		errcontext("%s: %s %d", p->func, p->what, p->round);
	else
		errcontext("%s: %s", p->func, p->what);
}

void
gc_run_pass(const GcPass *pass, SPIPlanPtr plan, ParamListInfo params,
			DestReceiver *dest)
{
	ErrorContextCallback errcb = {.previous = error_context_stack,
	.callback = pass_context,.arg = (void *) pass};

	error_context_stack = &errcb;
	gc_run_readonly(plan, params, dest);
	error_context_stack = errcb.previous;
}

void
gc_exec_pass(const GcPass *pass, const char *sql, int expected)
{
	ErrorContextCallback errcb = {.previous = error_context_stack,
	.callback = pass_context,.arg = (void *) pass};
	SPIPlanPtr	plan;
	int			ret;

	error_context_stack = &errcb;
	plan = SPI_prepare(sql, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	/* one statement: a source that closes its parenthesis adds none */
	if (list_length(SPI_plan_get_plan_sources(plan)) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the source query must be a single statement that returns rows")));
	ret = SPI_execute_plan(plan, NULL, NULL, false, 0);
	if (ret != expected)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	SPI_freeplan(plan);
	error_context_stack = errcb.previous;
}

const char *
gc_driver_schema(FunctionCallInfo fcinfo)
{
	Oid			fn = fcinfo->flinfo->fn_oid;
	Oid			ext = getExtensionOfObject(ProcedureRelationId, fn);
	char	   *nsp;

	/* a function of the library declared outside the extension */
	if (!OidIsValid(ext))
		ext = get_extension_oid("gpuclust", false);
	LockDatabaseObject(ExtensionRelationId, ext, 0, AccessShareLock);
	/* a DROP that committed before the lock was granted */
	nsp = get_namespace_name(get_func_namespace(fn));
	if (get_extension_name(ext) == NULL || nsp == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension gpuclust was dropped as the call began")));
	return quote_identifier(nsp);
}

void
gc_driver_not_null(FunctionCallInfo fcinfo, int i, const char *name)
{
	if (PG_ARGISNULL(i))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name)));
}

ArrayType *
gc_agg_writable_array(FunctionCallInfo fcinfo, ArrayType *a)
{
	ArrayType  *copy;

	if (AggCheckCallContext(fcinfo, NULL))
		return a;
	copy = palloc(VARSIZE(a));
	memcpy(copy, a, VARSIZE(a));
	return copy;
}

ArrayType *
gc_flat_array(Oid elemtype, Size elemsize, const void *values, int len)
{
	Size		bytes = ARR_OVERHEAD_NONULLS(1) + elemsize * (Size) len;
	ArrayType  *a = values ? palloc(bytes) : palloc0(bytes);

	SET_VARSIZE(a, bytes);
	a->ndim = 1;
	a->dataoffset = 0;
	a->elemtype = elemtype;
	ARR_DIMS(a)[0] = len;
	ARR_LBOUND(a)[0] = 1;
	if (values)
		memcpy(ARR_DATA_PTR(a), values, elemsize * (Size) len);
	return a;
}
