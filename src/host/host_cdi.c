// SPDX-License-Identifier: Apache-2.0
// CDI specs for prepared IMEX channel claims: one file per claim in the CDI
// folder the container runtime reads, naming the channel device nodes a
// container of the claim gets. Written atomically so a runtime never reads
// half a spec; removed when the claim is unprepared.
#include "nvl72/host.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "host_int.h"
#include "nvl72/base.h"

/* The oldest CDI version that takes what these specs use. A device named by
 * a claim UID may start with a digit, which needs 0.5.0, and nothing here
 * needs more (device-node fileMode, major and minor are older): see
 * requiresV050, validSpecVersions and ValidateVersion in version.go of
 * tags.cncf.io/container-device-interface/specs-go v1.1.0, the version
 * containerd v2.2.9's go.mod requires; it accepts every listed version at
 * or above the spec's minimum, 0.3.0 to 1.1.0. */
#define CDI_VERSION "0.5.0"
#define CDI_CHANNEL_DIR "/dev/nvidia-caps-imex-channels"
#define CDI_UID_MAX 128

static bool uid_ok(const char *uid)
{
	size_t n = strlen(uid);

	if (n == 0 || n > CDI_UID_MAX)
		return false;
	/* A CDI device name: letters, digits, '-', '_', '.', ':' (pkg/parser
	 * ValidateDeviceName); claim UIDs are UUIDs. */
	for (size_t i = 0; i < n; i++) {
		char c = uid[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == ':'))
			return false;
	}
	return true;
}

enum nv_err host_cdi_path(const char *cdi_dir, const char *claim_uid, char *out, size_t outsz)
{
	int n;

	if (!uid_ok(claim_uid))
		return NV_E_INVAL;
	n = snprintf(out, outsz, "%s/%s-%s.json", cdi_dir, HOST_CDI_VENDOR, claim_uid);
	return n < 0 || (size_t)n >= outsz ? NV_E_TOO_LARGE : NV_OK;
}

enum nv_err host_cdi_render(const char *claim_uid, unsigned major, const unsigned *channels,
                            size_t n_channels, struct buf *out)
{
	json_t *nodes, *spec;
	char *text;
	enum nv_err rc;

	if (!uid_ok(claim_uid) || major == 0 || n_channels == 0 ||
	    n_channels > HOST_CDI_CHANNELS_MAX)
		return NV_E_INVAL;
	nodes = json_array();
	for (size_t i = 0; i < n_channels; i++) {
		char path[96];
		snprintf(path, sizeof(path), CDI_CHANNEL_DIR "/channel%u", channels[i]);
		/* fileMode is Go's os.FileMode: the permission bits as a number. */
		json_array_append_new(nodes,
		                      json_pack("{s:s,s:s,s:I,s:I,s:s,s:I}", "path", path, "type",
		                                "c", "major", (json_int_t)major, "minor",
		                                (json_int_t)channels[i], "permissions", "rw",
		                                "fileMode", (json_int_t)0666));
	}
	spec = json_pack("{s:s,s:s,s:[{s:s,s:{s:o}}]}", "cdiVersion", CDI_VERSION, "kind",
	                 HOST_CDI_KIND, "devices", "name", claim_uid, "containerEdits",
	                 "deviceNodes", nodes);
	text = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(spec);
	if (text == NULL)
		return NV_E_INTERNAL;
	rc = buf_append_str(out, text);
	if (rc == NV_OK)
		rc = buf_append_byte(out, '\n');
	free(text);
	return rc;
}

enum nv_err host_cdi_write(const char *cdi_dir, const char *claim_uid, const char *data, size_t len)
{
	char path[PATH_MAX_HOST];
	enum nv_err rc = host_cdi_path(cdi_dir, claim_uid, path, sizeof(path));

	if (rc != NV_OK)
		return rc;
	/* As CDI specs are: root writes, anyone may read. */
	return host_file_write_atomic(path, data, len, 0644);
}

enum nv_err host_cdi_remove(const char *cdi_dir, const char *claim_uid, bool *removed)
{
	char path[PATH_MAX_HOST];
	enum nv_err rc = host_cdi_path(cdi_dir, claim_uid, path, sizeof(path));
	int fd;

	*removed = false;
	if (rc != NV_OK)
		return rc;
	if (unlink(path) != 0)
		return errno == ENOENT ? NV_OK : NV_E_IO;
	*removed = true;
	/* The removal outlives a crash like the write did. */
	fd = open(cdi_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		(void)close(fd);
	}
	return NV_OK;
}

bool host_cdi_exists(const char *cdi_dir, const char *claim_uid)
{
	char path[PATH_MAX_HOST];

	return host_cdi_path(cdi_dir, claim_uid, path, sizeof(path)) == NV_OK &&
	       access(path, F_OK) == 0;
}
