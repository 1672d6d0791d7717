// SPDX-License-Identifier: Apache-2.0
// The simulator's nvidia-imex-ctl: asks the local fake daemon on its command
// port (from config.cfg) for -q or -N [-j] and prints the answer. With the
// tray's imex_ctl_hang fault set it hangs forever, as the real one can; with
// imex_ctl_garbage its -N -j answer is cut off in the middle of the JSON.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

/* The command endpoint from the config at cfg, a host path: the ctl runs
 * in the host's mount namespace, as the real one does. */
static void cmd_endpoint(const char *cfg, char *ip, size_t ipsz, unsigned *port)
{
	char v[64], full[SIM_PATH_MAX];
	unsigned long p;

	snprintf(ip, ipsz, "127.0.0.1");
	*port = 50005;
	if (!sim_host_path(full, sizeof(full), sim_root(), cfg))
		snprintf(full, sizeof(full), "%s", cfg);
	if (sim_kv_get(full, "IMEX_CMD_BIND_INTERFACE_IP", v, sizeof(v)) && v[0] != '\0')
		snprintf(ip, ipsz, "%s", v);
	if (sim_kv_get(full, "IMEX_CMD_PORT", v, sizeof(v)) && sim_parse_ul(v, 65535, &p))
		*port = (unsigned)p;
}

static void hang_if_told(void)
{
	char p[SIM_PATH_MAX];

	if (!sim_path(p, sizeof(p), sim_root(), "faults/imex_ctl_hang") || !sim_exists(p))
		return;
	for (;;) {
		struct timespec ts = {3600, 0};
		nanosleep(&ts, NULL);
	}
}

static bool fault(const char *name)
{
	char p[SIM_PATH_MAX];

	return sim_path(p, sizeof(p), sim_root(), name) && sim_exists(p);
}

static int ask(const char *ip, unsigned port, const char *what)
{
	struct sockaddr_in sa = {0};
	struct timeval tv = {10, 0};
	char chunk[4096];
	int fd;
	ssize_t r;

	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		return 2;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 2;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "Connection to IMEX daemon at %s:%u failed: %s\n", ip, port,
		        strerror(errno));
		close(fd);
		return 1;
	}
	if (send(fd, what, strlen(what), MSG_NOSIGNAL) < 0) {
		close(fd);
		return 1;
	}
	while ((r = read(fd, chunk, sizeof(chunk))) > 0)
		fwrite(chunk, 1, (size_t)r, stdout);
	close(fd);
	return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *cfg = "/etc/nvidia-imex/config.cfg", *what = NULL;
	bool json = false, nodes = false;
	char ip[64];
	unsigned port;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			cfg = argv[++i];
		else if (strcmp(argv[i], "-q") == 0)
			what = "Q\n";
		else if (strcmp(argv[i], "-N") == 0)
			nodes = true;
		else if (strcmp(argv[i], "-j") == 0)
			json = true;
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			i++;
		else if (strcmp(argv[i], "-H") != 0) {
			fprintf(stderr, "usage: nvidia-imex-ctl [-c config] -q | -N [-j] [-H]\n");
			return 2;
		}
	}
	if (nodes)
		what = json ? "NJ\n" : "N\n";
	if (what == NULL) {
		fprintf(stderr, "usage: nvidia-imex-ctl [-c config] -q | -N [-j] [-H]\n");
		return 2;
	}
	hang_if_told();
	if (nodes && json && fault("faults/imex_ctl_garbage")) {
		fputs("{\"nodes\": {\"0\": {\"host\": \"127.0.0.", stdout);
		return 0;
	}
	cmd_endpoint(cfg, ip, sizeof(ip), &port);
	return ask(ip, port, what);
}
