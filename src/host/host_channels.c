// SPDX-License-Identifier: Apache-2.0
// IMEX channel device nodes. The driver never makes them (but channel 0 on
// request) and they vanish on reboot or reload, so the agent recreates them
// with the class's dynamic major, read from /proc/devices each time.
#include "nvl72/host.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "host_int.h"
#include "nvl72/base.h"

#define CHANNEL_CLASS "nvidia-caps-imex-channels"
#define CHANNEL_DIR "/dev/nvidia-caps-imex-channels"
#define CHANNELS_MAX (1u << 20)

enum nv_err host_channel_major(struct host *h, unsigned *major)
{
	struct buf b;
	enum nv_err rc = host_read(h, "/proc/devices", (size_t)64 << 10, &b);

	if (rc != NV_OK) {
		host_fail(h, "/proc/devices: %s", nv_err_str(rc));
		return rc;
	}
	rc = host_proc_devices_major(buf_str(&b), b.len, CHANNEL_CLASS, major);
	buf_clear(&b);
	if (rc != NV_OK)
		host_fail(h, "/proc/devices has no %s (driver not loaded?)", CHANNEL_CLASS);
	return rc;
}

/* One node: kept when right, replaced when it has the wrong type or numbers. */
static enum nv_err channel_one(struct host *h, const char *dir, unsigned major, unsigned minor,
                               bool *made)
{
	char path[PATH_MAX_HOST];
	struct stat st;
	enum nv_err rc;

	int n;

	*made = false;
	n = snprintf(path, sizeof(path), "%s/channel%u", dir, minor);
	if (n < 0 || (size_t)n >= sizeof(path))
		return NV_E_TOO_LARGE;
	if (lstat(path, &st) == 0) {
		if (S_ISCHR(st.st_mode) && major(st.st_rdev) == major &&
		    minor(st.st_rdev) == minor && (st.st_mode & 07777) == 0666)
			return NV_OK;
		log_warn("agent", "replacing a wrong IMEX channel node", "path=%s", path);
		if (unlink(path) != 0)
			return NV_E_IO;
	} else if (errno != ENOENT) {
		return NV_E_IO;
	}
	rc = h->ops->mknod_chr(h, path, major, minor, 0666);
	if (rc != NV_OK) {
		host_fail(h, "mknod %s: %s", path, nv_err_str(rc));
		return rc;
	}
	*made = true;
	return NV_OK;
}

enum nv_err host_channels_ensure(struct host *h, unsigned count, unsigned *created)
{
	char dir[PATH_MAX_HOST];
	unsigned major, n = 0;
	enum nv_err rc;

	*created = 0;
	if (count == 0)
		return NV_OK;
	if (count > CHANNELS_MAX)
		return NV_E_RANGE;
	rc = host_channel_major(h, &major);
	if (rc != NV_OK)
		return rc;
	rc = host_path(h, CHANNEL_DIR, dir, sizeof(dir));
	if (rc == NV_OK)
		rc = host_mkdirs(dir, 0755);
	if (rc != NV_OK)
		return rc;
	for (unsigned i = 0; i < count; i++) {
		bool made;
		rc = channel_one(h, dir, major, i, &made);
		if (rc != NV_OK)
			return rc;
		n += made;
	}
	*created = n;
	return NV_OK;
}
