/* SPDX-License-Identifier: Apache-2.0 */
/* Allocation that never returns NULL: running out of memory is logged and
 * aborts, so every buffer fed from outside carries an explicit cap instead. */
/* Contract: every call is thread-safe and never blocks on I/O. Nothing
 * here returns NULL; what is returned belongs to the caller, who frees it
 * with free() (secure_free_str when it held a secret). */
#ifndef NVL72_ALLOC_H
#define NVL72_ALLOC_H

#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *ptr, size_t size);
/* Grows an array of nmemb elements of size bytes, checking the product. */
void *xreallocarray(void *ptr, size_t nmemb, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Allocates and formats like asprintf. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* For a long-running daemon, once at start before any thread: every
 * allocation of 128 KiB or more (a list page, a /metrics response) gets
 * pages of its own, returned to the system when freed. glibc otherwise
 * raises that threshold to the size of the largest such block freed, after
 * which those blocks come from the heap and their pages stay in the
 * process after the free. Does nothing outside glibc. */
void alloc_large_blocks_unmapped(void);
/* Returns the free pages of the heap to the system (glibc's malloc_trim):
 * after the frees of a large pass. Does nothing outside glibc. */
void alloc_release_free(void);

/* Overwrites a secret before it is freed; the compiler may not elide it. */
void secure_wipe(void *p, size_t len);
/* Wipes a NUL-terminated secret and frees it; NULL does nothing. */
void secure_free_str(char *s);

#endif
