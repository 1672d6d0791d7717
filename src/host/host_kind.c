// SPDX-License-Identifier: Apache-2.0
// Which kind of host the agent is on. An NVL72 compute tray has no local
// NVSwitch and no switch-management ConnectX, so Fabric Manager has nothing
// to do there; seeing either means the tray is something else (HGX).
#include "nvl72/host.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "host_int.h"
#include "nvl72/base.h"

#define VPD_MAX ((size_t)64 << 10)
#define IB_DEVICES_MAX 64

static bool dir_has_entries(const char *full)
{
	DIR *d = opendir(full);
	struct dirent *e;
	bool any = false;

	if (d == NULL)
		return false;
	while (!any && (e = readdir(d)) != NULL)
		any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return any;
}

static bool vpd_names_switch(const char *ibdir, const char *dev)
{
	char path[PATH_MAX_HOST];
	struct buf b;
	bool hit;
	int n = snprintf(path, sizeof(path), "%s/%s/device/vpd", ibdir, dev);

	if (n < 0 || (size_t)n >= sizeof(path))
		return false;
	/* A VPD larger than any real one is read no further than the cap. */
	if (host_file_read(path, VPD_MAX, &b) != NV_OK)
		return false;
	hit = b.len > 0 && memmem(b.data, b.len, "SW_MNG", 6) != NULL;
	buf_clear(&b);
	return hit;
}

static bool ib_switch_present(struct host *h)
{
	char ibdir[PATH_MAX_HOST];
	struct dirent *e;
	bool hit = false;
	int seen = 0;
	DIR *d;

	if (host_path(h, "/sys/class/infiniband", ibdir, sizeof(ibdir)) != NV_OK)
		return false;
	d = opendir(ibdir);
	if (d == NULL)
		return false;
	while (!hit && seen++ < IB_DEVICES_MAX && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			hit = vpd_names_switch(ibdir, e->d_name);
	closedir(d);
	return hit;
}

enum nv_err host_kind_read(struct host *h, struct host_kind *out)
{
	struct host_kind k = {0};
	char p[PATH_MAX_HOST];

	if (host_path(h, "/proc/driver/nvidia-nvswitch/devices", p, sizeof(p)) == NV_OK)
		k.local_nvswitch = dir_has_entries(p);
	k.switch_via_cx = ib_switch_present(h);
	if (host_path(h, "/run/nvidia/validations/.driver-ctr-ready", p, sizeof(p)) == NV_OK)
		k.driver_container = access(p, F_OK) == 0;
	*out = k;
	return NV_OK;
}

bool host_kind_wants_fm(const struct host_kind *k)
{
	return k->local_nvswitch || k->switch_via_cx;
}
