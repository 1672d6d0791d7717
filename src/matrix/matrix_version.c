// SPDX-License-Identifier: Apache-2.0
// Version strings as NVIDIA ships them (driver 580.173.02 and 615.23, GPU
// firmware 97.00.B9.00.69, BMC 25.06-A, NVOS 25.02.2445) and the ranges that
// bound CUDA and NCCL. Comparison is segment by segment and natural inside a
// segment, so one routine orders every format the matrix carries.
#include "nvl72/matrix.h"

#include <ctype.h>
#include <string.h>

#include "nvl72/buf.h"
#include "nvl72/parse.h"

static bool is_sep(char c)
{
	return c == '.' || c == '-' || c == '_' || c == '+' || c == '~';
}

// Skips the optional "v" of "v1.34.1" so that it equals "1.34.1".
static const char *version_body(const char *s)
{
	if ((s[0] == 'v' || s[0] == 'V') && isdigit((unsigned char)s[1]))
		return s + 1;
	return s;
}

enum nv_err matrix_version_parse(const char *s, struct matrix_version *out)
{
	if (s == NULL || s[0] == '\0')
		return NV_E_PARSE;
	size_t len = strnlen(s, MATRIX_VERSION_LEN);
	if (len >= MATRIX_VERSION_LEN)
		return NV_E_TOO_LARGE;
	const char *b = version_body(s);
	if (!isalnum((unsigned char)b[0]) || is_sep(s[len - 1]))
		return NV_E_PARSE;
	unsigned nseg = 1;
	for (const char *p = b; *p != '\0'; p++) {
		if (is_sep(*p)) {
			if (is_sep(p[1]))
				return NV_E_PARSE;
			nseg++;
		} else if (!isalnum((unsigned char)*p)) {
			return NV_E_PARSE;
		}
	}
	if (nseg > MATRIX_VERSION_SEGMENTS)
		return NV_E_PARSE;
	memcpy(out->text, s, len + 1);
	out->nseg = (unsigned char)nseg;
	return NV_OK;
}

// Finds the next segment at *p; false at the end.
static bool seg_next(const char **p, const char **seg, size_t *len)
{
	const char *s = *p;
	if (*s == '\0')
		return false;
	if (is_sep(*s))
		s++;
	size_t n = 0;
	while (s[n] != '\0' && !is_sep(s[n]))
		n++;
	*seg = s;
	*len = n;
	*p = s + n;
	return true;
}

static size_t run_len(const char *s, size_t len, bool digits)
{
	size_t n = 0;
	while (n < len && (isdigit((unsigned char)s[n]) != 0) == digits)
		n++;
	return n;
}

static int num_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	while (alen > 1 && *a == '0') {
		a++;
		alen--;
	}
	while (blen > 1 && *b == '0') {
		b++;
		blen--;
	}
	if (alen != blen)
		return alen < blen ? -1 : 1;
	int c = memcmp(a, b, alen);
	return (c > 0) - (c < 0);
}

static int alpha_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	for (size_t i = 0; i < n; i++) {
		int ca = tolower((unsigned char)a[i]);
		int cb = tolower((unsigned char)b[i]);
		if (ca != cb)
			return ca < cb ? -1 : 1;
	}
	if (alen != blen)
		return alen < blen ? -1 : 1;
	return 0;
}

// Natural order inside one segment: digit runs by value, letter runs by
// case-folded text, and a digit run sorts before a letter run.
static int seg_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	while (alen > 0 && blen > 0) {
		bool da = isdigit((unsigned char)*a) != 0;
		bool db = isdigit((unsigned char)*b) != 0;
		if (da != db)
			return da ? -1 : 1;
		size_t ra = run_len(a, alen, da);
		size_t rb = run_len(b, blen, db);
		int c = da ? num_cmp(a, ra, b, rb) : alpha_cmp(a, ra, b, rb);
		if (c != 0)
			return c;
		a += ra;
		alen -= ra;
		b += rb;
		blen -= rb;
	}
	if (alen == blen)
		return 0;
	return alen < blen ? -1 : 1;
}

static bool seg_is_zero(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != '0')
			return false;
	return len > 0;
}

// Compares at most max_seg segments; a missing segment equals a zero one
// ("13" == "13.0") and sorts before anything else ("25.06" < "25.06-A").
static int version_cmp_n(const char *a, const char *b, unsigned max_seg)
{
	const char *pa = version_body(a);
	const char *pb = version_body(b);
	for (unsigned i = 0; i < max_seg; i++) {
		const char *sa = NULL;
		const char *sb = NULL;
		size_t la = 0;
		size_t lb = 0;
		bool ha = seg_next(&pa, &sa, &la);
		bool hb = seg_next(&pb, &sb, &lb);
		if (!ha && !hb)
			return 0;
		if (!ha)
			return seg_is_zero(sb, lb) ? 0 : -1;
		if (!hb)
			return seg_is_zero(sa, la) ? 0 : 1;
		int c = seg_cmp(sa, la, sb, lb);
		if (c != 0)
			return c;
	}
	return 0;
}

int matrix_version_cmp(const struct matrix_version *a, const struct matrix_version *b)
{
	return version_cmp_n(a->text, b->text, MATRIX_VERSION_SEGMENTS);
}

int matrix_version_cmp_str(const char *a, const char *b)
{
	return version_cmp_n(a, b, MATRIX_VERSION_SEGMENTS);
}

bool matrix_version_eq(const struct matrix_version *a, const struct matrix_version *b)
{
	return matrix_version_cmp(a, b) == 0;
}

// A bound written with fewer segments covers all its refinements:
// "13.0.2" matches "<=13.0" and "=13.0".
static int version_cmp_bound(const struct matrix_version *v, const struct matrix_version *bound)
{
	return version_cmp_n(v->text, bound->text, bound->nseg);
}

enum nv_err matrix_driver_parse(const char *s, struct matrix_driver *out)
{
	struct matrix_version v;
	enum nv_err rc = matrix_version_parse(s, &v);
	if (rc != NV_OK)
		return rc;
	if (v.nseg < 2 || v.nseg > 3)
		return NV_E_PARSE;
	for (const char *p = s; *p != '\0'; p++)
		if (!isdigit((unsigned char)*p) && *p != '.')
			return NV_E_PARSE;
	int64_t branch = 0;
	size_t dot = strcspn(s, ".");
	rc = parse_i64_n(s, dot, 1, 99999, &branch);
	if (rc != NV_OK)
		return NV_E_PARSE;
	out->version = v;
	out->branch = (unsigned)branch;
	return NV_OK;
}

enum nv_err matrix_branch_parse(const char *s, unsigned *out)
{
	if (s == NULL)
		return NV_E_PARSE;
	if (s[0] == 'R' || s[0] == 'r')
		s++;
	int v = 0;
	if (!isdigit((unsigned char)s[0]) || parse_int(s, 1, 99999, &v) != NV_OK)
		return NV_E_PARSE;
	*out = (unsigned)v;
	return NV_OK;
}

static const char *cmp_op_parse(const char *p, enum matrix_cmp_op *op)
{
	if (p[0] == '>' && p[1] == '=') {
		*op = MATRIX_CMP_GE;
		return p + 2;
	}
	if (p[0] == '<' && p[1] == '=') {
		*op = MATRIX_CMP_LE;
		return p + 2;
	}
	if (p[0] == '=' && p[1] == '=') {
		*op = MATRIX_CMP_EQ;
		return p + 2;
	}
	*op = MATRIX_CMP_EQ;
	if (p[0] == '>')
		*op = MATRIX_CMP_GT;
	else if (p[0] == '<')
		*op = MATRIX_CMP_LT;
	else if (p[0] != '=')
		return p;
	return p + 1;
}

static enum nv_err range_term_add(struct matrix_range *r, const char *term, size_t len)
{
	char tmp[MATRIX_VERSION_LEN + 4];
	if (len >= sizeof(tmp))
		return NV_E_TOO_LARGE;
	if (r->n >= MATRIX_RANGE_TERMS)
		return NV_E_TOO_LARGE;
	memcpy(tmp, term, len);
	tmp[len] = '\0';
	enum matrix_cmp_op op;
	const char *v = cmp_op_parse(tmp, &op);
	while (*v == ' ')
		v++;
	struct matrix_cmp *c = &r->terms[r->n];
	enum nv_err rc = matrix_version_parse(v, &c->version);
	if (rc != NV_OK)
		return rc;
	c->op = op;
	r->n++;
	return NV_OK;
}

enum nv_err matrix_range_parse(const char *s, struct matrix_range *out)
{
	if (s == NULL)
		return NV_E_PARSE;
	if (strnlen(s, MATRIX_RANGE_LEN) >= MATRIX_RANGE_LEN)
		return NV_E_TOO_LARGE;
	struct matrix_range r;
	memset(&r, 0, sizeof(r));
	const char *p = s;
	while (*p == ' ')
		p++;
	if (strcmp(p, "*") == 0) {
		*out = r;
		return NV_OK;
	}
	while (*p != '\0') {
		// An operator may be followed by spaces: ">= 2.25.2".
		size_t n = strspn(p, "<>= ");
		n += strcspn(p + n, ", ");
		enum nv_err rc = range_term_add(&r, p, n);
		if (rc != NV_OK)
			return rc;
		p += n;
		p += strspn(p, ", ");
	}
	if (r.n == 0)
		return NV_E_PARSE;
	*out = r;
	return NV_OK;
}

static bool cmp_holds(const struct matrix_cmp *c, const struct matrix_version *v)
{
	int d = version_cmp_bound(v, &c->version);
	switch (c->op) {
	case MATRIX_CMP_EQ:
		return d == 0;
	case MATRIX_CMP_LT:
		return d < 0;
	case MATRIX_CMP_LE:
		return d <= 0;
	case MATRIX_CMP_GT:
		return d > 0;
	case MATRIX_CMP_GE:
		return d >= 0;
	}
	return false;
}

bool matrix_range_contains(const struct matrix_range *r, const struct matrix_version *v)
{
	for (unsigned i = 0; i < r->n; i++)
		if (!cmp_holds(&r->terms[i], v))
			return false;
	return true;
}

void matrix_range_format(const struct matrix_range *r, char *out, size_t cap)
{
	static const char *const ops[] = {
	        [MATRIX_CMP_EQ] = "=", [MATRIX_CMP_LT] = "<",  [MATRIX_CMP_LE] = "<=",
	        [MATRIX_CMP_GT] = ">", [MATRIX_CMP_GE] = ">=",
	};
	struct buf b;
	buf_init(&b, cap > 0 ? cap - 1 : 0);
	if (r->n == 0)
		(void)buf_append_str(&b, "*");
	for (unsigned i = 0; i < r->n; i++)
		(void)buf_printf(&b, "%s%s%s", i ? ", " : "", ops[r->terms[i].op],
		                 r->terms[i].version.text);
	if (cap > 0)
		(void)str_copy(out, cap, buf_str(&b));
	buf_clear(&b);
}

enum nv_err matrix_range_set_inclusive(struct matrix_range *r, const char *min, const char *max)
{
	struct matrix_range t;
	memset(&t, 0, sizeof(t));
	t.n = 2;
	t.terms[0].op = MATRIX_CMP_GE;
	t.terms[1].op = MATRIX_CMP_LE;
	enum nv_err rc = matrix_version_parse(min, &t.terms[0].version);
	if (rc == NV_OK)
		rc = matrix_version_parse(max, &t.terms[1].version);
	if (rc != NV_OK)
		return rc;
	if (matrix_version_cmp(&t.terms[0].version, &t.terms[1].version) > 0)
		return NV_E_RANGE;
	*r = t;
	return NV_OK;
}
