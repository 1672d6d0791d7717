// SPDX-License-Identifier: Apache-2.0
// The host object: configuration with defaults, a host file's path as the
// agent opens it (under the host root) and as the tools see it, bounded
// reads and atomic writes of host files, and the driver readers that
// combine the proc and sys files with NVML.
#include "nvl72/host.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_int.h"
#include "nvl72/base.h"

#define PROC_FILE_MAX ((size_t)64 << 10)

void host_init(struct host *h, const struct host_cfg *cfg, const struct host_ops *ops)
{
	memset(h, 0, sizeof(*h));
	if (cfg != NULL)
		h->cfg = *cfg;
	h->ops = ops ? ops : &host_real_ops;
	if (h->cfg.host_root == NULL || h->cfg.host_root[0] == '\0')
		h->cfg.host_root = "/";
	if (h->cfg.nvml_path == NULL)
		h->cfg.nvml_path = "libnvidia-ml.so.1";
	if (h->cfg.systemctl == NULL)
		h->cfg.systemctl = "/usr/bin/systemctl";
	if (h->cfg.modprobe == NULL)
		h->cfg.modprobe = "/usr/sbin/modprobe";
	if (h->cfg.modinfo == NULL)
		h->cfg.modinfo = "/usr/sbin/modinfo";
	if (h->cfg.imex_bin == NULL)
		h->cfg.imex_bin = "/usr/bin/nvidia-imex";
	if (h->cfg.imex_ctl == NULL)
		h->cfg.imex_ctl = "/usr/bin/nvidia-imex-ctl";
	if (h->cfg.imex_dir == NULL)
		h->cfg.imex_dir = "/etc/nvidia-imex";
	if (h->cfg.hosts_file == NULL)
		h->cfg.hosts_file = "/etc/hosts";
	if (h->cfg.state_dir == NULL)
		h->cfg.state_dir = "/run/nvl72-agent";
	if (h->cfg.tool_timeout_ms <= 0)
		h->cfg.tool_timeout_ms = 5000;
	if (h->cfg.install_timeout_ms <= 0)
		h->cfg.install_timeout_ms = 30 * 60 * 1000;
}

void host_clear(struct host *h)
{
	if (h == NULL)
		return;
	host_nvml_close(h);
}

enum nv_err host_path(const struct host *h, const char *path, char *out, size_t outsz)
{
	const char *root = h->cfg.host_root;
	size_t rl = strlen(root);
	int n;

	while (rl > 0 && root[rl - 1] == '/')
		rl--;
	while (*path == '/')
		path++;
	n = snprintf(out, outsz, "%.*s/%s", (int)rl, root, path);
	if (n < 0 || (size_t)n >= outsz)
		return NV_E_TOO_LARGE;
	return NV_OK;
}

enum nv_err host_own_path(const char *path, char *out, size_t outsz)
{
	int n;

	while (*path == '/')
		path++;
	n = snprintf(out, outsz, "/%s", path);
	if (n < 0 || (size_t)n >= outsz)
		return NV_E_TOO_LARGE;
	return NV_OK;
}

enum nv_err host_tool_path(const struct host *h, const char *path, char *out, size_t outsz)
{
	if (h->cfg.tool_ns == HOST_TOOL_NS_AGENT)
		return host_path(h, path, out, outsz);
	return host_own_path(path, out, outsz);
}

enum nv_err host_file_read(const char *full, size_t max, struct buf *out)
{
	char chunk[4096];
	enum nv_err rc = NV_OK;
	int fd = open(full, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? NV_E_NOT_FOUND : NV_E_IO;
	buf_init(out, max);
	for (;;) {
		ssize_t r = read(fd, chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = NV_E_IO;
			break;
		}
		if (r == 0)
			break;
		rc = buf_append(out, chunk, (size_t)r);
		if (rc != NV_OK)
			break;
	}
	close(fd);
	if (rc != NV_OK)
		buf_clear(out);
	return rc;
}

enum nv_err host_read(const struct host *h, const char *path, size_t max, struct buf *out)
{
	char full[PATH_MAX_HOST];
	enum nv_err rc = host_path(h, path, full, sizeof(full));

	if (rc != NV_OK)
		return rc;
	return host_file_read(full, max, out);
}

enum nv_err host_mkdirs(const char *full, unsigned mode)
{
	char tmp[PATH_MAX_HOST];

	if (str_copy(tmp, sizeof(tmp), full) != NV_OK)
		return NV_E_TOO_LARGE;
	for (char *p = tmp + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) != 0 && errno != EEXIST)
			return NV_E_IO;
		*p = '/';
	}
	if (mkdir(tmp, mode) != 0 && errno != EEXIST)
		return NV_E_IO;
	return NV_OK;
}

static enum nv_err write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return NV_E_IO;
		data += w;
		len -= (size_t)w;
	}
	return NV_OK;
}

static void dir_fsync(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

enum nv_err host_file_write_atomic(const char *full, const char *data, size_t len, unsigned mode)
{
	char dir[PATH_MAX_HOST], tmp[PATH_MAX_HOST + 16];
	enum nv_err rc;
	int fd = -1;

	if (str_copy(dir, sizeof(dir), full) != NV_OK)
		return NV_E_TOO_LARGE;
	rc = host_mkdirs(dirname(dir), 0755);
	if (rc != NV_OK)
		return rc;
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", full);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return NV_E_IO;
	rc = write_all(fd, data, len);
	if (rc == NV_OK && (fchmod(fd, (mode_t)mode) != 0 || fsync(fd) != 0))
		rc = NV_E_IO;
	if (close(fd) != 0 && rc == NV_OK)
		rc = NV_E_IO;
	if (rc == NV_OK && rename(tmp, full) != 0)
		rc = NV_E_IO;
	if (rc != NV_OK) {
		unlink(tmp);
		return rc;
	}
	dir_fsync(dir);
	return NV_OK;
}

enum nv_err host_write_atomic(const struct host *h, const char *path, const char *data, size_t len,
                              unsigned mode)
{
	char full[PATH_MAX_HOST];
	enum nv_err rc = host_path(h, path, full, sizeof(full));

	if (rc != NV_OK)
		return rc;
	return host_file_write_atomic(full, data, len, mode);
}

enum nv_err host_driver_read(struct host *h, struct host_driver_info *out)
{
	struct host_driver_info d = {0};
	struct buf b;
	size_t n = 0;
	enum nv_err rc;

	rc = host_read(h, "/proc/driver/nvidia/version", PROC_FILE_MAX, &b);
	if (rc == NV_E_NOT_FOUND) {
		*out = d;
		return NV_OK;
	}
	if (rc != NV_OK) {
		host_fail(h, "/proc/driver/nvidia/version: %s", nv_err_str(rc));
		return rc;
	}
	rc = host_proc_version_parse(b.data, b.len, &d);
	buf_clear(&b);
	if (rc != NV_OK) {
		host_fail(h, "/proc/driver/nvidia/version: no NVRM version line");
		return rc;
	}
	if (host_read(h, "/sys/module/nvidia/version", 256, &b) == NV_OK) {
		(void)host_sys_version_parse(b.data, b.len, d.sys_version, sizeof(d.sys_version));
		buf_clear(&b);
	}
	/* NVML is optional here: a loaded driver without a usable library
	 * still has a version; the GPU read reports the NVML problem. */
	if (h->ops->nvml_read != NULL)
		(void)h->ops->nvml_read(h, NULL, 0, &n, &d, NULL, 0);
	*out = d;
	return NV_OK;
}

enum nv_err host_params_read(struct host *h, struct host_driver_params *out)
{
	struct buf b;
	enum nv_err rc = host_read(h, "/proc/driver/nvidia/params", PROC_FILE_MAX, &b);

	if (rc != NV_OK)
		return rc;
	rc = host_params_parse(b.data ? b.data : "", b.len, out);
	if (rc != NV_OK)
		host_fail(h, "/proc/driver/nvidia/params: %s", nv_err_str(rc));
	buf_clear(&b);
	return rc;
}

enum nv_err host_gpus_read(struct host *h, struct host_gpu *gpus, size_t cap, size_t *n)
{
	char why[HOST_ERRMSG_LEN] = "";
	enum nv_err rc;

	if (h->ops->nvml_read == NULL)
		return NV_E_UNSUPPORTED;
	rc = h->ops->nvml_read(h, gpus, cap, n, NULL, why, sizeof(why));
	if (rc != NV_OK)
		host_fail(h, "NVML: %s", why[0] ? why : nv_err_str(rc));
	return rc;
}
