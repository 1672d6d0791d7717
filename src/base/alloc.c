// SPDX-License-Identifier: Apache-2.0
// Allocation wrappers that abort with a log line when memory runs out, so
// callers never carry NULL checks for a condition they cannot handle.
#include "nvl72/alloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static void oom(size_t size)
{
	char line[96];
	int n = snprintf(line, sizeof(line), "fatal: out of memory allocating %zu bytes\n", size);
	if (n > 0)
		(void)!write(STDERR_FILENO, line, (size_t)n);
	abort();
}

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);
	if (p == NULL)
		oom(size);
	return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (p == NULL)
		oom(nmemb * size);
	return p;
}

void *xrealloc(void *ptr, size_t size)
{
	void *p = realloc(ptr, size ? size : 1);
	if (p == NULL)
		oom(size);
	return p;
}

void *xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	if (size != 0 && nmemb > SIZE_MAX / size)
		oom(SIZE_MAX);
	return xrealloc(ptr, nmemb * size);
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = xmalloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom(0);
	char *p = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void secure_wipe(void *p, size_t len)
{
	if (p == NULL)
		return;
	/* A volatile pointer keeps the stores from being optimised away. */
	volatile unsigned char *v = p;
	while (len--)
		*v++ = 0;
}

void secure_free_str(char *s)
{
	if (s == NULL)
		return;
	secure_wipe(s, strlen(s));
	free(s);
}

void alloc_large_blocks_unmapped(void)
{
#ifdef __GLIBC__
	/* Setting it turns glibc's adaptive threshold off (mallopt(3)). */
	(void)mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

void alloc_release_free(void)
{
#ifdef __GLIBC__
	(void)malloc_trim(0);
#endif
}
