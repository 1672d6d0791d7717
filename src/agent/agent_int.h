/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the files of the agent's host layer: plain file I/O on
 * full paths, the last-error setter, and the NVML backend's lifecycle. */
#ifndef NVL72_AGENT_INT_H
#define NVL72_AGENT_INT_H

#include "nvl72/agent_host.h"

#define PATH_MAX_AGENT 1024

enum nv_err agent_file_read(const char *full, size_t max, struct buf *out);
enum nv_err agent_file_write_atomic(const char *full, const char *data, size_t len,
				    unsigned mode);
enum nv_err agent_mkdirs(const char *full, unsigned mode);
void agent_host_fail(struct agent_host *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void agent_nvml_close(struct agent_host *h);
/* The real backend's nvml_read (ops member). */
enum nv_err agent_nvml_real_read(struct agent_host *h, struct agent_gpu *gpus, size_t cap,
				 size_t *n, struct agent_driver_info *drv, char *why,
				 size_t whysz);

/* Runs a configured tool through the ops with the tool timeout; a non-zero
 * exit is NV_E_IO with the first output line in h->err. */
enum nv_err agent_tool_run(struct agent_host *h, const char *const *argv, size_t cap,
			   struct agent_run_result *res);

/* Whether pid is alive and not a zombie (reaps it when it is our child). */
bool agent_pid_alive(pid_t pid);
/* The start time of pid from /proc (clock ticks since boot); 0 if gone. */
unsigned long long agent_pid_starttime(pid_t pid);
/* SIGTERM, wait up to grace_ms, then SIGKILL; reaps our own children. */
void agent_pid_stop(pid_t pid, int64_t grace_ms);

#endif
