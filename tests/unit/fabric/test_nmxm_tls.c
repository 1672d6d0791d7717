// SPDX-License-Identifier: Apache-2.0
// The NMX-M client's TLS against a loopback HTTPS server with a certificate
// made for the test: the CA given in memory is trusted, another CA or the
// system store is not, and skipping verification is an explicit choice.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cmocka.h>

#include "../../../src/fabric/fabric_int.h"

struct cert {
	EVP_PKEY *key;
	X509 *x509;
	char pem[4096];
};

struct tls_srv {
	int lfd, port;
	SSL_CTX *ctx;
	pthread_t th;
	int served;
};

/* A self-signed P-256 certificate for 127.0.0.1, valid for an hour. */
static void cert_make(struct cert *c, long serial)
{
	X509V3_CTX v3;
	X509_NAME *name;
	X509_EXTENSION *ext;
	BIO *mem = BIO_new(BIO_s_mem());
	char *data = NULL;
	long len;

	c->key = EVP_EC_gen("P-256");
	assert_non_null(c->key);
	c->x509 = X509_new();
	X509_set_version(c->x509, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(c->x509), serial);
	X509_gmtime_adj(X509_getm_notBefore(c->x509), -60);
	X509_gmtime_adj(X509_getm_notAfter(c->x509), 3600);
	X509_set_pubkey(c->x509, c->key);
	name = X509_get_subject_name(c->x509);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"nmx-m test",
	                           -1, -1, 0);
	X509_set_issuer_name(c->x509, name);
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, c->x509, c->x509, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1");
	assert_non_null(ext);
	X509_add_ext(c->x509, ext, -1);
	X509_EXTENSION_free(ext);
	assert_true(X509_sign(c->x509, c->key, EVP_sha256()) > 0);
	PEM_write_bio_X509(mem, c->x509);
	len = BIO_get_mem_data(mem, &data);
	assert_true(len > 0 && (size_t)len < sizeof(c->pem));
	memcpy(c->pem, data, (size_t)len);
	c->pem[len] = '\0';
	BIO_free(mem);
}

static void cert_free(struct cert *c)
{
	X509_free(c->x509);
	EVP_PKEY_free(c->key);
}

static void *tls_serve(void *arg)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	                           "Content-Length: 2\r\nConnection: close\r\n\r\n[]";
	struct tls_srv *s = arg;
	char req[8192];

	for (;;) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			break;
		SSL *ssl = SSL_new(s->ctx);
		SSL_set_fd(ssl, fd);
		if (SSL_accept(ssl) == 1) {
			size_t n = 0;
			while (n + 1 < sizeof(req)) {
				int r = SSL_read(ssl, req + n, (int)(sizeof(req) - 1 - n));
				if (r <= 0)
					break;
				n += (size_t)r;
				req[n] = '\0';
				if (strstr(req, "\r\n\r\n") != NULL)
					break;
			}
			SSL_write(ssl, resp, (int)strlen(resp));
			SSL_shutdown(ssl);
			s->served++;
		}
		SSL_free(ssl);
		close(fd);
	}
	return NULL;
}

static struct tls_srv *tls_start(const struct cert *c)
{
	struct tls_srv *s = calloc(1, sizeof(*s));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	s->ctx = SSL_CTX_new(TLS_server_method());
	assert_int_equal(SSL_CTX_use_certificate(s->ctx, c->x509), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(s->ctx, c->key), 1);
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->lfd, 8), 0);
	getsockname(s->lfd, (struct sockaddr *)&sa, &len);
	s->port = ntohs(sa.sin_port);
	pthread_create(&s->th, NULL, tls_serve, s);
	return s;
}

static void tls_stop(struct tls_srv *s)
{
	shutdown(s->lfd, SHUT_RDWR);
	close(s->lfd);
	pthread_join(s->th, NULL);
	SSL_CTX_free(s->ctx);
	free(s);
}

/* Lists partitions once with the given CA (NULL: none) and returns the result. */
static enum nv_err list_with(const struct tls_srv *s, const char *ca, bool insecure)
{
	struct fabric_config c;
	struct fabric_backend *b = NULL;
	struct fabric_partition *all = NULL;
	struct fabric_status st;
	size_t n = 1;
	enum nv_err err;

	fabric_config_init(&c);
	snprintf(c.endpoint, sizeof(c.endpoint), "https://127.0.0.1:%d", s->port);
	assert_int_equal(fabric_config_set_secret(&c, "token", "t0ken", 5), NV_OK);
	if (ca != NULL)
		assert_int_equal(fabric_config_set_secret(&c, "ca.crt", ca, strlen(ca)), NV_OK);
	c.insecure_skip_verify = insecure;
	c.retries = 0;
	c.connect_timeout_ms = 3000;
	assert_int_equal(fabric_backend_new(&c, &b, &st), NV_OK);
	fabric_config_clear(&c);
	err = fabric_partition_list(b, &all, &n, &st);
	if (err == NV_OK)
		assert_int_equal(n, 0);
	free(all);
	fabric_backend_free(b);
	return err;
}

static void test_nmxm_tls_trusts_only_the_given_ca(void **state)
{
	(void)state;
	struct cert server, other;

	cert_make(&server, 1);
	cert_make(&other, 2);
	struct tls_srv *s = tls_start(&server);
	assert_int_equal(list_with(s, server.pem, false), NV_OK);
	assert_int_equal(s->served, 1);
	assert_int_equal(list_with(s, other.pem, false), NV_E_TLS);
	assert_int_equal(list_with(s, NULL, false), NV_E_TLS);
	assert_int_equal(s->served, 1);
	assert_int_equal(list_with(s, NULL, true), NV_OK);
	tls_stop(s);
	cert_free(&server);
	cert_free(&other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_nmxm_tls_trusts_only_the_given_ca),
	};
	log_set_level(LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
