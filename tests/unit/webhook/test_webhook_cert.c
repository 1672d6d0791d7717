// SPDX-License-Identifier: Apache-2.0
// Unit tests for the webhook's serving certificate, without an apiserver:
// what is generated (SANs, chain, lifetime), when a stored pair is reused
// and when it is not (wrong key, expiring, missing SAN, foreign CA), the CA
// kept in the bundle across a renewal, and the health check.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/webhook/webhook_int.h"

#define DAY_MS ((int64_t)86400000)

static const char *const ips[] = {"127.0.0.1", NULL};

static struct webhook_cert *cert_for(const char *service, int64_t valid_ms)
{
	struct webhook_cert *c = NULL;
	struct webhook_cert_config cfg = {
	        .ns = "nvl72-system",
	        .secret = "nvl72-operator-webhook-tls",
	        .service = service,
	        .extra_ips = ips,
	        .valid_ms = valid_ms,
	};
	assert_int_equal(webhook_cert_new(&cfg, &c), NV_OK);
	return c;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static void test_cert_generate_is_usable(void **state)
{
	(void)state;
	struct webhook_cert *c = cert_for("nvl72-operator", 0);
	int64_t now = time_wall_ms();
	assert_int_equal(wh_cert_generate(c, NULL), NV_OK);
	const char *crt = webhook_cert_pem(c);
	const char *key = webhook_cert_key_pem(c);
	const char *ca = webhook_cert_ca_pem(c);
	assert_non_null(strstr(crt, "-----BEGIN CERTIFICATE-----"));
	assert_non_null(strstr(key, "-----BEGIN PRIVATE KEY-----"));
	assert_int_equal(count(ca, "BEGIN CERTIFICATE"), 1);
	assert_false(webhook_cert_reused(c));
	// About a year, and reusable for all of it but the last 30 days.
	int64_t na = webhook_cert_not_after_ms(c);
	assert_true(na > now + 364 * DAY_MS && na < now + 366 * DAY_MS);
	int64_t got = 0;
	const char *why = NULL;
	assert_true(wh_cert_usable(c, crt, key, ca, now, &got, &why));
	assert_null(why);
	assert_true(got / 1000 == na / 1000 || got / 1000 == na / 1000 - 1);
	assert_false(wh_cert_usable(c, crt, key, ca, now + 340 * DAY_MS, &got, &why));
	assert_string_equal(why, "the certificate expires too soon");
	struct buf b;
	buf_init(&b, 256);
	assert_true(webhook_cert_check(c, &b));
	buf_clear(&b);
	webhook_cert_free(c);
}

static void test_cert_usable_refuses_mismatches(void **state)
{
	(void)state;
	struct webhook_cert *a = cert_for("nvl72-operator", 0);
	struct webhook_cert *b = cert_for("nvl72-operator", 0);
	struct webhook_cert *other = cert_for("another-service", 0);
	assert_int_equal(wh_cert_generate(a, NULL), NV_OK);
	assert_int_equal(wh_cert_generate(b, NULL), NV_OK);
	assert_int_equal(wh_cert_generate(other, NULL), NV_OK);
	int64_t now = time_wall_ms();
	int64_t na = 0;
	const char *why = NULL;
	assert_false(wh_cert_usable(a, webhook_cert_pem(a), webhook_cert_key_pem(b),
	                            webhook_cert_ca_pem(a), now, &na, &why));
	assert_string_equal(why, "tls.key does not match tls.crt");
	assert_false(wh_cert_usable(a, webhook_cert_pem(a), webhook_cert_key_pem(a),
	                            webhook_cert_ca_pem(b), now, &na, &why));
	assert_string_equal(why, "tls.crt is not signed by a current CA of ca.crt");
	// A pair made for another Service does not cover this one's names.
	assert_false(wh_cert_usable(a, webhook_cert_pem(other), webhook_cert_key_pem(other),
	                            webhook_cert_ca_pem(other), now, &na, &why));
	assert_string_equal(why, "a DNS name is missing from the certificate");
	assert_false(wh_cert_usable(a, "garbage", "garbage", "garbage", now, &na, &why));
	assert_string_equal(why, "tls.crt or tls.key does not parse");
	assert_false(wh_cert_usable(a, "", "", "", now, &na, &why));
	webhook_cert_free(a);
	webhook_cert_free(b);
	webhook_cert_free(other);
}

static void test_cert_generate_short_lifetime_is_renewed(void **state)
{
	(void)state;
	// A 10-day certificate is never worth reusing with 30 days' margin.
	struct webhook_cert *c = cert_for("nvl72-operator", 10 * DAY_MS);
	assert_int_equal(wh_cert_generate(c, NULL), NV_OK);
	int64_t na = 0;
	const char *why = NULL;
	assert_false(wh_cert_usable(c, webhook_cert_pem(c), webhook_cert_key_pem(c),
	                            webhook_cert_ca_pem(c), time_wall_ms(), &na, &why));
	assert_string_equal(why, "the certificate expires too soon");
	webhook_cert_free(c);
}

static void test_cert_generate_keeps_previous_ca(void **state)
{
	(void)state;
	struct webhook_cert *c = cert_for("nvl72-operator", 0);
	assert_int_equal(wh_cert_generate(c, NULL), NV_OK);
	char *old_crt = xstrdup(webhook_cert_pem(c));
	char *old_key = xstrdup(webhook_cert_key_pem(c));
	char *old_ca = xstrdup(webhook_cert_ca_pem(c));
	assert_int_equal(wh_cert_generate(c, old_ca), NV_OK);
	const char *bundle = webhook_cert_ca_pem(c);
	assert_int_equal(count(bundle, "BEGIN CERTIFICATE"), 2);
	assert_non_null(strstr(bundle, old_ca));
	assert_ptr_not_equal(strstr(bundle, old_ca), bundle); // the new CA comes first
	// A replica still serving the old pair stays trusted through the bundle.
	int64_t na = 0;
	const char *why = NULL;
	assert_true(wh_cert_usable(c, old_crt, old_key, bundle, time_wall_ms(), &na, &why));
	assert_true(wh_cert_usable(c, webhook_cert_pem(c), webhook_cert_key_pem(c), bundle,
	                           time_wall_ms(), &na, &why));
	free(old_crt);
	secure_free_str(old_key);
	free(old_ca);
	webhook_cert_free(c);
}

static void test_cert_new_and_check_edges(void **state)
{
	(void)state;
	struct webhook_cert *c = NULL;
	struct webhook_cert_config cfg = {.ns = "ns", .secret = "s", .service = ""};
	assert_int_equal(webhook_cert_new(&cfg, &c), NV_E_INVAL);
	assert_int_equal(webhook_cert_new(NULL, &c), NV_E_INVAL);
	webhook_cert_free(NULL);
	c = cert_for("svc", 0);
	struct buf b;
	buf_init(&b, 256);
	assert_false(webhook_cert_check(c, &b));
	assert_string_equal(buf_str(&b), "no serving certificate");
	// Without a client nothing is read or written.
	assert_int_equal(webhook_cert_ensure(c, NULL), NV_E_STATE);
	assert_int_equal(webhook_cert_start(c), NV_E_STATE);
	buf_clear(&b);
	webhook_cert_free(c);
	c = cert_for("svc", DAY_MS / 2);
	assert_int_equal(wh_cert_generate(c, NULL), NV_OK);
	buf_init(&b, 256);
	assert_false(webhook_cert_check(c, &b));
	assert_non_null(strstr(buf_str(&b), "expires within a day"));
	buf_clear(&b);
	webhook_cert_free(c);
}

int main(void)
{
	log_set_level(LOG_LVL_ERROR);
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_cert_generate_is_usable),
	        cmocka_unit_test(test_cert_usable_refuses_mismatches),
	        cmocka_unit_test(test_cert_generate_short_lifetime_is_renewed),
	        cmocka_unit_test(test_cert_generate_keeps_previous_ca),
	        cmocka_unit_test(test_cert_new_and_check_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
