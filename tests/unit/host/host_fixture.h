/* SPDX-License-Identifier: Apache-2.0 */
/* A throw-away host for the agent's unit tests: a temp folder holding a host
 * root and a bin folder of small shell scripts standing in for systemctl,
 * modprobe, nvidia-imex-ctl and friends, all wired into an host. */
#ifndef NVL72_TEST_HOST_FIXTURE_H
#define NVL72_TEST_HOST_FIXTURE_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../src/host/host_int.h"
#include "nvl72/host.h"
#include "nvl72/base.h"

struct fx {
	char dir[256], root[300], bin[300];
	char tool[8][400];
	const char *installer[3];
	struct host h;
};

enum { FX_SYSTEMCTL, FX_MODPROBE, FX_MODINFO, FX_IMEX, FX_IMEX_CTL, FX_INSTALLER };

static inline int fx_mkdirs(char *dir)
{
	for (char *p = dir + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(dir, 0755);
		*p = '/';
	}
	return mkdir(dir, 0755) == 0 || access(dir, F_OK) == 0 ? 0 : -1;
}

static inline void fx_write(const char *path, const char *text, unsigned mode)
{
	char dir[1024];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	if (fx_mkdirs(dir) != 0)
		abort();
	f = fopen(path, "w");
	if (f == NULL)
		abort();
	fputs(text, f);
	fclose(f);
	chmod(path, (mode_t)mode);
}

/* A file under the host root. */
static inline void fx_file(struct fx *x, const char *rel, const char *text)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", x->root, rel);
	fx_write(p, text, 0644);
}

static inline char *fx_slurp(struct fx *x, const char *rel)
{
	char p[600];
	struct buf b;

	snprintf(p, sizeof(p), "%s/%s", x->root, rel);
	(void)x;
	{
		FILE *f = fopen(p, "rb");
		char chunk[4096];
		size_t n;
		if (f == NULL)
			return NULL;
		buf_init(&b, 1 << 20);
		while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
			buf_append(&b, chunk, n);
		fclose(f);
	}
	return buf_take(&b);
}

/* A tool script; body runs under /bin/sh with R set to the host root. */
static inline void fx_script(struct fx *x, int which, const char *body)
{
	char text[4096];

	snprintf(text, sizeof(text), "#!/bin/sh\nR='%s'\n%s\n", x->root, body);
	fx_write(x->tool[which], text, 0755);
}

static inline void fx_init(struct fx *x, const struct host_ops *ops)
{
	static const char *const names[] = {"systemctl",   "modprobe",        "modinfo",
	                                    "nvidia-imex", "nvidia-imex-ctl", "installer"};
	struct host_cfg cfg = {0};

	memset(x, 0, sizeof(*x));
	snprintf(x->dir, sizeof(x->dir), "/tmp/nvl72-agent-test.XXXXXX");
	if (mkdtemp(x->dir) == NULL)
		abort();
	snprintf(x->root, sizeof(x->root), "%s/host", x->dir);
	snprintf(x->bin, sizeof(x->bin), "%s/bin", x->dir);
	for (size_t i = 0; i < ARRAY_LEN(names); i++)
		snprintf(x->tool[i], sizeof(x->tool[i]), "%s/%s", x->bin, names[i]);
	x->installer[0] = x->tool[FX_INSTALLER];
	x->installer[1] = "{version}";
	cfg.host_root = x->root;
	cfg.nvml_path = "/nonexistent/libnvidia-ml.so.1";
	cfg.systemctl = x->tool[FX_SYSTEMCTL];
	cfg.modprobe = x->tool[FX_MODPROBE];
	cfg.modinfo = x->tool[FX_MODINFO];
	cfg.imex_bin = x->tool[FX_IMEX];
	cfg.imex_ctl = x->tool[FX_IMEX_CTL];
	cfg.installer = x->installer;
	cfg.tool_timeout_ms = 3000;
	host_init(&x->h, &cfg, ops);
	fx_file(x, "etc/.keep", "");
}

static inline int fx_rm(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

static inline void fx_clear(struct fx *x)
{
	host_clear(&x->h);
	nftw(x->dir, fx_rm, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
