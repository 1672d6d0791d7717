// SPDX-License-Identifier: Apache-2.0
// Label selectors in the apiserver's text form ("a=b,c in (d,e),!f"),
// parsed once and matched against an object's labels without the API. The
// grammar and meaning follow apimachinery's labels.Parse: requirements
// joined by commas, all of which must hold.
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/json.h"
#include "nvl72/kube_ctrl.h"

#define SEL_MAX_REQS 32
#define SEL_MAX_VALUES 16
#define SEL_KEY_MAX 317 /* a DNS-1123 prefix of 253, "/", a name of 63 */
#define SEL_VALUE_MAX 63

enum sel_op { SEL_EXISTS, SEL_ABSENT, SEL_EQ, SEL_NE, SEL_IN, SEL_NOTIN };

struct sel_req {
	enum sel_op op;
	char key[SEL_KEY_MAX + 1];
	unsigned nvals;
	char vals[SEL_MAX_VALUES][SEL_VALUE_MAX + 1];
};

struct kube_selector {
	unsigned n;
	struct sel_req reqs[SEL_MAX_REQS];
};

struct sel_lex {
	const char *s, *p;
	char *err;
	size_t cap;
};

static bool sel_fail(struct sel_lex *l, const char *fmt, ...)
{
	char what[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (l->cap > 0)
		snprintf(l->err, l->cap, "at offset %zu: %s", (size_t)(l->p - l->s), what);
	return false;
}

static void sel_space(struct sel_lex *l)
{
	while (*l->p == ' ' || *l->p == '\t')
		l->p++;
}

static bool sel_word_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.' || c == '/';
}

/* A key ([A-Za-z0-9._-/]) or a value (the same without "/"), at most max
 * bytes; "" allowed here, refused by the caller where it is no key. */
static bool sel_word(struct sel_lex *l, char *out, size_t max, const char *what)
{
	bool key = max == SEL_KEY_MAX;
	size_t n = 0;

	sel_space(l);
	while (sel_word_char(l->p[n]) && (key || l->p[n] != '/'))
		n++;
	if (n > max)
		return sel_fail(l, "%s longer than %zu characters", what, max);
	memcpy(out, l->p, n);
	out[n] = '\0';
	l->p += n;
	sel_space(l);
	return true;
}

/* Whether the next word is kw (a whole word, followed by space or "("). */
static bool sel_keyword(struct sel_lex *l, const char *kw)
{
	size_t n = strlen(kw);

	if (strncmp(l->p, kw, n) != 0 || sel_word_char(l->p[n]))
		return false;
	l->p += n;
	sel_space(l);
	return true;
}

static bool sel_set(struct sel_lex *l, struct sel_req *r)
{
	if (*l->p != '(')
		return sel_fail(l, "expected \"(\" after in/notin");
	l->p++;
	for (;;) {
		if (r->nvals == SEL_MAX_VALUES)
			return sel_fail(l, "more than %d values in one set", SEL_MAX_VALUES);
		if (!sel_word(l, r->vals[r->nvals], SEL_VALUE_MAX, "a value"))
			return false;
		r->nvals++;
		if (*l->p == ')')
			break;
		if (*l->p != ',')
			return sel_fail(l, "expected \",\" or \")\" in a value set");
		l->p++;
	}
	l->p++;
	return true;
}

static bool sel_req_parse(struct sel_lex *l, struct sel_req *r)
{
	memset(r, 0, sizeof(*r));
	sel_space(l);
	r->op = SEL_EXISTS;
	if (*l->p == '!') {
		l->p++;
		r->op = SEL_ABSENT;
	}
	if (!sel_word(l, r->key, SEL_KEY_MAX, "a key"))
		return false;
	if (r->key[0] == '\0')
		return sel_fail(l, "expected a label key");
	if (r->op == SEL_ABSENT || *l->p == ',' || *l->p == '\0')
		return true;
	if (l->p[0] == '!' && l->p[1] == '=') {
		r->op = SEL_NE;
		l->p += 2;
	} else if (l->p[0] == '=') {
		r->op = SEL_EQ;
		l->p += l->p[1] == '=' ? 2 : 1;
	} else if (sel_keyword(l, "notin")) {
		r->op = SEL_NOTIN;
		return sel_set(l, r);
	} else if (sel_keyword(l, "in")) {
		r->op = SEL_IN;
		return sel_set(l, r);
	} else {
		return sel_fail(l, "expected =, ==, !=, in or notin after key \"%s\"", r->key);
	}
	r->nvals = 1;
	return sel_word(l, r->vals[0], SEL_VALUE_MAX, "a value");
}

enum nv_err kube_selector_parse(const char *text, struct kube_selector **out, char *err,
                                size_t errcap)
{
	struct sel_lex l = {text ? text : "", text ? text : "", err, errcap};
	struct kube_selector *s = xcalloc(1, sizeof(*s));

	*out = NULL;
	sel_space(&l);
	while (*l.p != '\0') {
		if (s->n == SEL_MAX_REQS) {
			sel_fail(&l, "more than %d requirements", SEL_MAX_REQS);
			goto fail;
		}
		if (!sel_req_parse(&l, &s->reqs[s->n]))
			goto fail;
		s->n++;
		if (*l.p == ',') {
			l.p++;
			if (*l.p == '\0') {
				sel_fail(&l, "a trailing comma");
				goto fail;
			}
		} else if (*l.p != '\0') {
			sel_fail(&l, "unexpected character '%c'", *l.p);
			goto fail;
		}
	}
	*out = s;
	return NV_OK;
fail:
	free(s);
	return NV_E_INVAL;
}

void kube_selector_free(struct kube_selector *s)
{
	free(s);
}

bool kube_selector_empty(const struct kube_selector *s)
{
	return s == NULL || s->n == 0;
}

bool kube_selector_names(const struct kube_selector *s, const char *key)
{
	for (unsigned i = 0; s != NULL && i < s->n; i++)
		if (strcmp(s->reqs[i].key, key) == 0)
			return true;
	return false;
}

static bool sel_in(const struct sel_req *r, const char *v)
{
	for (unsigned i = 0; i < r->nvals; i++)
		if (strcmp(r->vals[i], v) == 0)
			return true;
	return false;
}

/* The first requirement labels fails, or -1 when all hold. */
static int sel_first_unmet(const struct kube_selector *s, const json_t *labels)
{
	for (unsigned i = 0; s != NULL && i < s->n; i++) {
		const struct sel_req *r = &s->reqs[i];
		const json_t *v = json_is_object(labels) ? json_object_get(labels, r->key) : NULL;
		const char *val = json_is_string(v) ? json_string_value(v) : NULL;
		bool ok = false;

		switch (r->op) {
		case SEL_EXISTS:
			ok = val != NULL;
			break;
		case SEL_ABSENT:
			ok = val == NULL;
			break;
		case SEL_EQ:
		case SEL_IN:
			ok = val != NULL && sel_in(r, val);
			break;
		case SEL_NE:
		case SEL_NOTIN:
			ok = val == NULL || !sel_in(r, val);
			break;
		}
		if (!ok)
			return (int)i;
	}
	return -1;
}

/* One requirement in the text form, as the apiserver would print it. */
static void sel_req_format(const struct sel_req *r, char *out, size_t cap)
{
	static const char *const op[] = {"", "!", "=", "!=", " in ", " notin "};
	size_t n;

	if (r->op == SEL_ABSENT) {
		snprintf(out, cap, "!%s", r->key);
		return;
	}
	n = (size_t)snprintf(out, cap, "%s%s%s", r->key, op[r->op],
	                     r->op == SEL_IN || r->op == SEL_NOTIN ? "(" : "");
	for (unsigned i = 0; i < r->nvals && n < cap; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? "," : "", r->vals[i]);
	if ((r->op == SEL_IN || r->op == SEL_NOTIN) && n < cap)
		snprintf(out + n, cap - n, ")");
}

bool kube_selector_match(const struct kube_selector *s, const json_t *labels, char *unmet,
                         size_t cap)
{
	int i = sel_first_unmet(s, labels);

	if (cap > 0)
		unmet[0] = '\0';
	if (i < 0)
		return true;
	if (cap > 0)
		sel_req_format(&s->reqs[i], unmet, cap);
	return false;
}
