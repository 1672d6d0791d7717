// SPDX-License-Identifier: Apache-2.0
// Build-time tool: turns the dashboard files into a C table of byte arrays
// so the operator serves them without touching the filesystem.
//
// usage: web_embed OUT.c FILE...   (each served as /<basename>)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMBED_FILE_MAX (4L << 20)

static const struct {
	const char *ext;
	const char *type;
} types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
        {".json", "application/json"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
};

static const char *type_of(const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t e = strlen(types[i].ext);
		if (n > e && strcmp(name + n - e, types[i].ext) == 0)
			return types[i].type;
	}
	return "application/octet-stream";
}

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* Served names are plain so they need no escaping in the C source. */
static int name_ok(const char *name)
{
	if (name[0] == '\0' || name[0] == '.')
		return 0;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			return 0;
	return 1;
}

static int embed_one(FILE *out, const char *path, int idx)
{
	FILE *in = fopen(path, "rb");
	if (in == NULL) {
		fprintf(stderr, "web_embed: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(out, "static const unsigned char asset_%d[] = {", idx);
	long total = 0;
	int c;
	while ((c = fgetc(in)) != EOF) {
		if (++total > EMBED_FILE_MAX) {
			fprintf(stderr, "web_embed: %s: larger than %ld bytes\n", path,
			        EMBED_FILE_MAX);
			fclose(in);
			return -1;
		}
		fprintf(out, "%s0x%02x,", (total % 16) == 1 ? "\n\t" : "", c);
	}
	int bad = ferror(in);
	fclose(in);
	if (bad) {
		fprintf(stderr, "web_embed: %s: read error\n", path);
		return -1;
	}
	/* An empty file still needs one element in C. */
	fprintf(out, "%s\n};\nstatic const size_t asset_%d_len = %ld;\n\n", total == 0 ? "0" : "",
	        idx, total);
	return 0;
}

static int embed_all(FILE *out, int n, char **files)
{
	fputs("// SPDX-License-Identifier: Apache-2.0\n"
	      "// Generated at build time from src/web/assets/ by web_embed.\n"
	      "// Do not edit; edit the assets instead.\n"
	      "#include \"web_assets.h\"\n\n",
	      out);
	for (int i = 0; i < n; i++) {
		if (!name_ok(base_of(files[i]))) {
			fprintf(stderr, "web_embed: %s: unsupported name\n", files[i]);
			return -1;
		}
		if (embed_one(out, files[i], i))
			return -1;
	}
	fputs("const struct web_asset web_assets[] = {\n", out);
	for (int i = 0; i < n; i++)
		fprintf(out, "\t{\"/%s\", \"%s\", asset_%d, asset_%d_len},\n", base_of(files[i]),
		        type_of(files[i]), i, i);
	if (n == 0)
		fputs("\t{\"\", \"\", 0, 0},\n", out);
	fprintf(out, "};\nconst size_t web_assets_count = %d;\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: web_embed OUT.c FILE...\n");
		return 2;
	}
	size_t tl = strlen(argv[1]) + 5;
	char *tmp = malloc(tl);
	if (tmp == NULL)
		return 1;
	snprintf(tmp, tl, "%s.tmp", argv[1]);
	FILE *out = fopen(tmp, "w");
	int rc = 1;
	if (out == NULL) {
		fprintf(stderr, "web_embed: %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	int bad = embed_all(out, argc - 2, argv + 2);
	if (fclose(out) != 0 || bad) {
		remove(tmp);
		goto out;
	}
	if (rename(tmp, argv[1]) != 0) {
		fprintf(stderr, "web_embed: %s: %s\n", argv[1], strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	return rc;
}
