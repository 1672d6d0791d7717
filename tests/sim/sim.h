/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the tray simulator: where a tray's sim root is, and
 * small bounded reads and writes of its key=value state files. Used by the
 * fake NVML library and the fake host tools alike, so it needs nothing else. */
#ifndef NVL72_SIM_H
#define NVL72_SIM_H

#include <stdbool.h>
#include <stddef.h>

#define SIM_ENV "NVL72_SIM_ROOT"
#define SIM_PATH_MAX 1024
#define SIM_FILE_MAX 65536

/* The tray's sim root from the environment, or NULL. */
const char *sim_root(void);
/* root + "/" + rel into out; false when it does not fit or root is NULL. */
bool sim_path(char *out, size_t outsz, const char *root, const char *rel);
/* A path handed to a host tool, where the simulated host keeps that file:
 * the tray's host folder (root/host) plus the path. The fake tools stand
 * for tools in the host's mount namespace, so they see the host's own
 * paths only: a path under the agent's host root, which a real host tool
 * could not open, is translated like any other and so is not found. false
 * when root is NULL, the path is not absolute or the result does not fit. */
bool sim_host_path(char *out, size_t outsz, const char *root, const char *path);
/* Reads a whole file (at most outsz - 1 bytes, NUL-terminated); -1 on error. */
long sim_read(const char *path, char *out, size_t outsz);
/* Writes a file through a temp file and rename, creating folders. */
bool sim_write(const char *path, const char *data, size_t len);
bool sim_exists(const char *path);
bool sim_mkdirs(const char *path);
/* The value of key in a key=value file; false when absent. */
bool sim_kv_get(const char *path, const char *key, char *out, size_t outsz);
/* Sets key to value in a key=value file, keeping the other lines. */
bool sim_kv_set(const char *path, const char *key, const char *value);
/* Parses an unsigned decimal or 0x hex number; false on anything else. */
bool sim_parse_ul(const char *s, unsigned long max, unsigned long *out);
/* A host step a tool is about to take: appends "name pid" to the tray's
 * steps.log, then waits delays/<name> milliseconds when that file holds a
 * number (simctl step-delay), so that a test can catch the step mid-way or
 * make the tool outlast the agent's --tool-timeout; "MS TIMES" delays only
 * the next TIMES runs of the step. */
void sim_step(const char *root, const char *name);
/* Trims trailing whitespace in place and returns s. */
char *sim_rtrim(char *s);
/* The driver version the tray under root has loaded (its
 * host/sys/module/nvidia/version, as /sys/module/nvidia/version on a real
 * host), trimmed; false when no module is loaded. */
bool sim_driver_loaded(const char *root, char *out, size_t outsz);

#endif
