// SPDX-License-Identifier: Apache-2.0
// Unit tests for reading NVIDIA's ComputeDomains: the discovery document,
// the domain that uses a node (from status.nodes, or from a
// ComputeDomainClique through its domain's UID) and the trimmed cache copy.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/json.h"
#include "nvl72/operator_nvidia.h"

static json_t *parse(const char *text)
{
	json_t *o = json_loads(text, 0, NULL);
	assert_non_null(o);
	return o;
}

static void test_op_nvidia_discovery_parse(void **state)
{
	bool d, c;
	json_t *l = parse("{\"kind\":\"APIResourceList\",\"groupVersion\":"
	                  "\"resource.nvidia.com/v1beta1\",\"resources\":["
	                  "{\"name\":\"computedomains\",\"namespaced\":true,\"kind\":"
	                  "\"ComputeDomain\"},{\"name\":\"computedomains/status\"},"
	                  "{\"name\":\"computedomaincliques\",\"kind\":\"ComputeDomainClique\"}]}");
	(void)state;
	op_nvidia_discovery_parse(l, &d, &c);
	assert_true(d);
	assert_true(c);
	json_decref(l);
	/* An older release: no per-clique objects. */
	l = parse("{\"resources\":[{\"name\":\"computedomains\"},"
	          "{\"name\":\"computedomains/status\"}]}");
	op_nvidia_discovery_parse(l, &d, &c);
	assert_true(d);
	assert_false(c);
	json_decref(l);
	op_nvidia_discovery_parse(NULL, &d, &c);
	assert_false(d);
	assert_false(c);
}

static void test_op_nvidia_node_domain(void **state)
{
	char out[OP_NVIDIA_NAME_MAX];
	json_t *domains = parse(
	        "[{\"metadata\":{\"name\":\"nv-a\",\"namespace\":\"team-nv\",\"uid\":\"uid-a\"},"
	        "\"status\":{\"status\":\"Ready\",\"nodes\":[{\"name\":\"r07-t05\",\"ipAddress\":"
	        "\"10.0.0.5\",\"cliqueID\":\"c.1\"},{\"name\":\"r07-t06\"}]}},"
	        "{\"metadata\":{\"name\":\"nv-b\",\"namespace\":\"team-nv\",\"uid\":\"uid-b\"},"
	        "\"status\":{\"status\":\"NotReady\"}}]");
	json_t *cliques = parse(
	        "[{\"metadata\":{\"name\":\"uid-b.1\",\"namespace\":\"nvidia-dra\",\"labels\":"
	        "{\"resource.nvidia.com/computeDomain\":\"uid-b\"}},\"daemons\":[{\"nodeName\":"
	        "\"r07-t07\",\"ipAddress\":\"10.0.0.7\",\"cliqueID\":\"c.1\"}]},"
	        "{\"metadata\":{\"name\":\"uid-z.1\",\"namespace\":\"nvidia-dra\",\"labels\":"
	        "{\"resource.nvidia.com/computeDomain\":\"uid-z\"}},\"daemons\":[{\"nodeName\":"
	        "\"r07-t09\"}]}]");
	(void)state;
	assert_true(op_nvidia_node_domain(domains, cliques, "r07-t06", out, sizeof(out)));
	assert_string_equal(out, "team-nv/nv-a");
	/* Listed only in a clique: its domain, by the clique's label. */
	assert_true(op_nvidia_node_domain(domains, cliques, "r07-t07", out, sizeof(out)));
	assert_string_equal(out, "team-nv/nv-b");
	/* A clique whose domain is not (yet) cached: the clique is named. */
	assert_true(op_nvidia_node_domain(domains, cliques, "r07-t09", out, sizeof(out)));
	assert_string_equal(out, "ComputeDomainClique nvidia-dra/uid-z.1");
	/* Nobody's, or no caches at all. */
	assert_false(op_nvidia_node_domain(domains, cliques, "r07-t08", out, sizeof(out)));
	assert_string_equal(out, "");
	assert_false(op_nvidia_node_domain(NULL, NULL, "r07-t05", out, sizeof(out)));
	assert_false(op_nvidia_node_domain(domains, cliques, "", out, sizeof(out)));
	assert_true(op_nvidia_node_domain(domains, NULL, "r07-t05", out, sizeof(out)));
	json_decref(domains);
	json_decref(cliques);
}

static void test_op_nvidia_trim_keeps_what_is_read(void **state)
{
	char out[OP_NVIDIA_NAME_MAX];
	json_t *d = parse(
	        "{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"ComputeDomain\","
	        "\"metadata\":{\"name\":\"nv-a\",\"namespace\":\"team-nv\",\"uid\":\"uid-a\","
	        "\"resourceVersion\":\"9\",\"annotations\":{\"big\":\"x\"},\"labels\":{\"a\":\"b\"}"
	        "},"
	        "\"spec\":{\"numNodes\":4,\"channel\":{\"resourceClaimTemplate\":{\"name\":\"t\"}}}"
	        ","
	        "\"status\":{\"status\":\"Ready\",\"nodes\":[{\"name\":\"r07-t05\",\"ipAddress\":"
	        "\"10.0.0.5\",\"cliqueID\":\"c.1\",\"index\":0,\"status\":\"Ready\"}]}}");
	json_t *c =
	        parse("{\"metadata\":{\"name\":\"uid-a.1\",\"namespace\":\"nvidia-dra\","
	              "\"ownerReferences\":[{}],\"labels\":{\"resource.nvidia.com/"
	              "computeDomain\":\"uid-a\"}},\"daemons\":[{\"nodeName\":\"r07-t08\","
	              "\"ipAddress\":\"10.0.0.8\",\"cliqueID\":\"c.1\",\"status\":\"Ready\"}]}");
	json_t *want = parse("{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":"
	                     "\"ComputeDomain\",\"metadata\":{\"name\":\"nv-a\",\"namespace\":"
	                     "\"team-nv\",\"uid\":\"uid-a\",\"resourceVersion\":\"9\",\"labels\":"
	                     "{\"a\":\"b\"}},\"status\":{\"nodes\":[{\"name\":\"r07-t05\"}]}}");
	json_t *dl = json_array(), *cl = json_array();
	(void)state;
	op_nvidia_trim(d, NULL);
	op_nvidia_trim(c, NULL);
	assert_true(json_equal(d, want));
	assert_null(jx_path(c, "metadata.ownerReferences"));
	assert_string_equal(jx_str_or(c, "daemons[0].nodeName", ""), "r07-t08");
	assert_null(jx_path(c, "daemons[0].ipAddress"));
	/* The trimmed copies answer as the full objects would. */
	json_array_append(dl, d);
	json_array_append(cl, c);
	assert_true(op_nvidia_node_domain(dl, cl, "r07-t08", out, sizeof(out)));
	assert_string_equal(out, "team-nv/nv-a");
	json_decref(dl);
	json_decref(cl);
	json_decref(want);
	json_decref(d);
	json_decref(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_op_nvidia_discovery_parse),
	        cmocka_unit_test(test_op_nvidia_node_domain),
	        cmocka_unit_test(test_op_nvidia_trim_keeps_what_is_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
