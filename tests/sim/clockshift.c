// SPDX-License-Identifier: Apache-2.0
// The host's wall clock moved for one process, as an NTP step or a resumed
// virtual machine moves it: a library for LD_PRELOAD that adds a number of
// seconds to CLOCK_REALTIME (and CLOCK_REALTIME_COARSE) as clock_gettime
// returns them. The number is the signed integer in the file that
// NVL72_CLOCK_SHIFT_FILE names, read again at most every 100 ms, so a test
// moves the clock by rewriting the file; no file or no number is 0.
//
// The monotonic clocks stay as they are, as a step of the wall clock leaves
// them: clock_gettime(2) of the Linux man-pages documents that
// CLOCK_REALTIME is affected by discontinuous jumps (settimeofday, NTP
// steps) and CLOCK_MONOTONIC is not. time() and gettimeofday() stay too: OpenSSL checks certificate
// lifetimes with them, and the test CA's certificates are minutes old, so a
// clock moved back an hour would fail every TLS handshake; the operator
// reads the wall clock only through clock_gettime.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_fn)(clockid_t, struct timespec *);

static _Atomic(clock_fn) real_fn;
static _Atomic int_least64_t shift_s;
static _Atomic int_least64_t next_read_ns;

static clock_fn real_clock(void)
{
	clock_fn f = atomic_load(&real_fn);

	if (f == NULL) {
		/* The POSIX way to take a function from dlsym. */
		*(void **)(&f) = dlsym(RTLD_NEXT, "clock_gettime");
		atomic_store(&real_fn, f);
	}
	return f;
}

/* The shift now, from the file when 100 ms have passed since the last read. */
static int_least64_t shift_now(clock_fn real)
{
	struct timespec m;
	int_least64_t now;
	const char *path;
	char b[32];
	ssize_t n;
	int fd;

	if (real(CLOCK_MONOTONIC, &m) != 0)
		return atomic_load(&shift_s);
	now = (int_least64_t)m.tv_sec * 1000000000 + m.tv_nsec;
	if (now < atomic_load(&next_read_ns))
		return atomic_load(&shift_s);
	atomic_store(&next_read_ns, now + 100000000);
	path = getenv("NVL72_CLOCK_SHIFT_FILE");
	if (path == NULL || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return atomic_load(&shift_s);
	n = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (n > 0) {
		b[n] = '\0';
		atomic_store(&shift_s, strtoll(b, NULL, 10));
	}
	return atomic_load(&shift_s);
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	clock_fn real = real_clock();
	int rc;

	if (real == NULL)
		return -1;
	rc = real(id, ts);
	if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
		ts->tv_sec += (time_t)shift_now(real);
	return rc;
}
