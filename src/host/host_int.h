/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the files of the agent's host layer: plain file I/O on
 * full paths, the last-error setter, and the NVML backend's lifecycle. */
/* Private to src/host/ and to the unit tests in tests/unit/host/ that use
 * the fixture host_fixture.h, which includes it; other modules go through
 * nvl72/host.h. */
#ifndef NVL72_HOST_INT_H
#define NVL72_HOST_INT_H

#include "nvl72/host.h"

#define PATH_MAX_HOST 1024

/* A host file's path as the host itself sees it (path made absolute): what
 * the host's own processes (a systemd unit's daemon) are handed. */
enum nv_err host_own_path(const char *path, char *out, size_t outsz);
enum nv_err host_file_read(const char *full, size_t max, struct buf *out);
enum nv_err host_file_write_atomic(const char *full, const char *data, size_t len, unsigned mode);
enum nv_err host_mkdirs(const char *full, unsigned mode);
void host_fail(struct host *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void host_nvml_close(struct host *h);
/* The real backend's nvml_read (ops member). */
enum nv_err host_nvml_real_read(struct host *h, struct host_gpu *gpus, size_t cap, size_t *n,
                                struct host_driver_info *drv, char *why, size_t whysz);

/* Runs a configured tool through the ops with the tool timeout; a non-zero
 * exit is NV_E_IO with the first output line in h->err. */
enum nv_err host_tool_run(struct host *h, const char *const *argv, size_t cap,
                          struct host_run_result *res);

/* Whether pid is alive and not a zombie (reaps it when it is our child). */
bool host_pid_alive(pid_t pid);
/* The start time of pid from /proc (clock ticks since boot); 0 if gone. */
unsigned long long host_pid_starttime(pid_t pid);
/* A spawn gate's record that writes "PID STARTTIME TAG\n" atomically to
 * path (an installer marker, a daemon's pid file); written tells a failed
 * start apart from a failed record, err is the errno of a failed write. */
struct host_pid_rec {
	const char *path, *tag;
	bool written;
	int err;
};
enum nv_err host_pid_record(void *arg, pid_t pid);
/* SIGTERM, wait up to grace_ms, then SIGKILL; reaps our own children. */
void host_pid_stop(pid_t pid, int64_t grace_ms);

#endif
