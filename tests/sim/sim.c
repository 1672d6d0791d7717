// SPDX-License-Identifier: Apache-2.0
// Bounded file helpers for the simulator's state files. Every tool and the
// fake NVML library re-read state on each call, so simctl edits take effect
// at once, as a changed host would.
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *sim_root(void)
{
	const char *r = getenv(SIM_ENV);
	return r != NULL && r[0] != '\0' ? r : NULL;
}

bool sim_path(char *out, size_t outsz, const char *root, const char *rel)
{
	int n;

	if (root == NULL)
		return false;
	n = snprintf(out, outsz, "%s/%s", root, rel);
	return n > 0 && (size_t)n < outsz;
}

bool sim_host_path(char *out, size_t outsz, const char *root, const char *path)
{
	int n;

	if (root == NULL || path[0] != '/')
		return false;
	n = snprintf(out, outsz, "%s/host%s", root, path);
	return n > 0 && (size_t)n < outsz;
}

long sim_read(const char *path, char *out, size_t outsz)
{
	size_t len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || outsz == 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (len + 1 < outsz) {
		ssize_t r = read(fd, out + len, outsz - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	out[len] = '\0';
	return (long)len;
}

bool sim_mkdirs(const char *path)
{
	char tmp[SIM_PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(tmp))
		return false;
	memcpy(tmp, path, n + 1);
	for (char *p = tmp + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return false;
		*p = '/';
	}
	return mkdir(tmp, 0755) == 0 || errno == EEXIST;
}

bool sim_write(const char *path, const char *data, size_t len)
{
	char dir[SIM_PATH_MAX], tmp[SIM_PATH_MAX + 16];
	char *slash;
	bool ok = true;
	int fd, n;

	n = snprintf(dir, sizeof(dir), "%s", path);
	if (n <= 0 || (size_t)n >= sizeof(dir))
		return false;
	slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		if (!sim_mkdirs(dir))
			return false;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0)
		return false;
	while (ok && len > 0) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		ok = w > 0;
		if (ok) {
			data += w;
			len -= (size_t)w;
		}
	}
	ok = ok && fchmod(fd, 0644) == 0;
	ok = close(fd) == 0 && ok;
	ok = ok && rename(tmp, path) == 0;
	if (!ok)
		unlink(tmp);
	return ok;
}

bool sim_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

bool sim_driver_loaded(const char *root, char *out, size_t outsz)
{
	char p[SIM_PATH_MAX];

	if (!sim_path(p, sizeof(p), root, "host/sys/module/nvidia/version") ||
	    sim_read(p, out, outsz) <= 0)
		return false;
	sim_rtrim(out);
	return true;
}

char *sim_rtrim(char *s)
{
	size_t n = strlen(s);

	while (n > 0 &&
	       (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
	return s;
}

bool sim_kv_get(const char *path, const char *key, char *out, size_t outsz)
{
	static char text[SIM_FILE_MAX];
	size_t kl = strlen(key);
	char *p;

	if (sim_read(path, text, sizeof(text)) < 0)
		return false;
	for (p = text; *p != '\0';) {
		char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		if (ll > kl && memcmp(p, key, kl) == 0 && p[kl] == '=') {
			size_t vl = ll - kl - 1;
			if (vl >= outsz)
				return false;
			memcpy(out, p + kl + 1, vl);
			out[vl] = '\0';
			sim_rtrim(out);
			return true;
		}
		p = nl ? nl + 1 : p + ll;
	}
	return false;
}

bool sim_kv_set(const char *path, const char *key, const char *value)
{
	static char text[SIM_FILE_MAX], next[SIM_FILE_MAX];
	size_t kl = strlen(key), used = 0;
	bool done = false;
	char *p;
	int n;

	if (sim_read(path, text, sizeof(text)) < 0)
		text[0] = '\0';
	for (p = text; *p != '\0';) {
		char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		bool mine = ll > kl && memcmp(p, key, kl) == 0 && p[kl] == '=';
		n = mine ? snprintf(next + used, sizeof(next) - used, "%s=%s\n", key, value)
		         : snprintf(next + used, sizeof(next) - used, "%.*s\n", (int)ll, p);
		if (n < 0 || (size_t)n >= sizeof(next) - used)
			return false;
		used += (size_t)n;
		done |= mine;
		p = nl ? nl + 1 : p + ll;
	}
	if (!done) {
		n = snprintf(next + used, sizeof(next) - used, "%s=%s\n", key, value);
		if (n < 0 || (size_t)n >= sizeof(next) - used)
			return false;
		used += (size_t)n;
	}
	return sim_write(path, next, used);
}

bool sim_parse_ul(const char *s, unsigned long max, unsigned long *out)
{
	char *end = NULL;
	unsigned long v;
	int base = 10;

	if (s == NULL || s[0] == '\0' || s[0] == '-' || s[0] == '+' || s[0] == ' ')
		return false;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		base = 16;
	errno = 0;
	v = strtoul(s, &end, base);
	if (errno != 0 || end == s || *end != '\0' || v > max)
		return false;
	*out = v;
	return true;
}

/* The delay of a step: "MS", every run, or "MS TIMES", the next TIMES
 * runs only (each run takes one; the file goes with the last). */
static unsigned long step_delay(const char *path)
{
	char v[48], *sp;
	unsigned long ms = 0, times;

	if (sim_read(path, v, sizeof(v)) <= 0)
		return 0;
	sim_rtrim(v);
	sp = strchr(v, ' ');
	if (sp != NULL)
		*sp++ = '\0';
	if (!sim_parse_ul(v, 600000, &ms))
		return 0;
	if (sp == NULL)
		return ms;
	if (!sim_parse_ul(sp, 1000000, &times) || times == 0)
		return 0;
	if (times == 1) {
		(void)unlink(path);
	} else {
		char left[48];
		int n = snprintf(left, sizeof(left), "%lu %lu\n", ms, times - 1);
		(void)sim_write(path, left, (size_t)n);
	}
	return ms;
}

void sim_step(const char *root, const char *name)
{
	char p[SIM_PATH_MAX], rel[128], line[160];
	unsigned long ms = 0;
	int fd, n;

	n = snprintf(rel, sizeof(rel), "delays/%s", name);
	if (n > 0 && (size_t)n < sizeof(rel) && sim_path(p, sizeof(p), root, rel))
		ms = step_delay(p);
	if (sim_path(p, sizeof(p), root, "steps.log")) {
		fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		n = snprintf(line, sizeof(line), "%s %d\n", name, (int)getpid());
		if (fd >= 0) {
			if (n > 0 && (size_t)n < sizeof(line))
				(void)!write(fd, line, (size_t)n);
			close(fd);
		}
	}
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
