// SPDX-License-Identifier: Apache-2.0
// The real host's process primitives: running a tool without a shell under a
// hard deadline (the whole process group is killed when it hangs), starting
// a detached daemon, device nodes, and checks on pids that outlive us.
#include "nvl72/host.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host_int.h"
#include "nvl72/base.h"

extern char **environ;

static enum nv_err spawn_attr_init(posix_spawnattr_t *a, short extra)
{
	sigset_t none, def;

	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGHUP);
	sigaddset(&def, SIGCHLD);
	if (posix_spawnattr_init(a) != 0)
		return NV_E_IO;
	if (posix_spawnattr_setsigmask(a, &none) != 0 ||
	    posix_spawnattr_setsigdefault(a, &def) != 0 ||
	    posix_spawnattr_setflags(
	            a, (short)(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | extra)) != 0) {
		posix_spawnattr_destroy(a);
		return NV_E_IO;
	}
	return NV_OK;
}

/* Starts argv with stdin from /dev/null and stdout+stderr into out_fd. */
static enum nv_err spawn_with(const char *const *argv, int out_fd, short flags, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	enum nv_err rc;
	int e;

	rc = spawn_attr_init(&attr, flags);
	if (rc != NV_OK)
		return rc;
	if (posix_spawn_file_actions_init(&fa) != 0) {
		posix_spawnattr_destroy(&attr);
		return NV_E_IO;
	}
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
	e = posix_spawn(pid, argv[0], &fa, &attr, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return e == 0 ? NV_OK : NV_E_IO;
}

#define EXIT_DRAIN_MS 200

static void output_keep(struct host_run_result *res, const char *chunk, size_t n)
{
	if (!res->truncated && buf_append(&res->out, chunk, n) != NV_OK) {
		(void)buf_append(&res->out, chunk, res->out.max - res->out.len);
		res->truncated = true;
	}
}

/* Reads the child's output (keeping at most the cap) until it has exited
 * and the pipe is closed, or shortly after its exit when a straggler it
 * left keeps the pipe open. false when the deadline passed first. */
static bool run_wait(int fd, pid_t pid, int64_t deadline, struct host_run_result *res, int *status,
                     bool *straggler)
{
	int64_t exited_at = -1;
	bool eof = false;
	char chunk[4096];

	for (;;) {
		struct pollfd p = {.fd = eof ? -1 : fd, .events = POLLIN};
		int64_t now = time_mono_ms();

		if (exited_at < 0 && waitpid(pid, status, WNOHANG) == pid)
			exited_at = now;
		if (exited_at >= 0 && (eof || now - exited_at >= EXIT_DRAIN_MS)) {
			*straggler = !eof;
			return true;
		}
		if (now >= deadline)
			return false;
		if (poll(&p, 1, (int)(deadline - now < 20 ? deadline - now : 20)) <= 0 || eof)
			continue;
		ssize_t r = read(fd, chunk, sizeof(chunk));
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			eof = true;
		else
			output_keep(res, chunk, (size_t)r);
	}
}

static enum nv_err real_run(struct host *h, const char *const *argv, int64_t timeout_ms, size_t cap,
                            struct host_run_result *res)
{
	int64_t deadline = time_mono_ms() + timeout_ms;
	int pfd[2], status = 0;
	bool straggler = false;
	pid_t pid;
	enum nv_err rc;

	(void)h;
	memset(res, 0, sizeof(*res));
	buf_init(&res->out, cap);
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return NV_E_IO;
	rc = spawn_with(argv, pfd[1], POSIX_SPAWN_SETPGROUP, &pid);
	close(pfd[1]);
	if (rc != NV_OK) {
		close(pfd[0]);
		return rc;
	}
	if (!run_wait(pfd[0], pid, deadline, res, &status, &straggler)) {
		/* The tool hangs: kill its whole group so no helper lingers. */
		kill(-pid, SIGKILL);
		(void)waitpid(pid, &status, 0);
		close(pfd[0]);
		res->timed_out = true;
		res->exit_code = -1;
		res->term_signal = SIGKILL;
		return NV_E_TIMEOUT;
	}
	if (straggler)
		kill(-pid, SIGKILL); /* a helper left holding our pipe */
	close(pfd[0]);
	if (WIFEXITED(status)) {
		res->exit_code = WEXITSTATUS(status);
	} else {
		res->exit_code = -1;
		res->term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	}
	return NV_OK;
}

/* The child of a gated spawn: set up as spawn_with would, then wait for
 * the parent's go byte. EOF (the parent failed to record us, or died) means
 * argv must never run. Only async-signal-safe calls: we were forked from a
 * threaded process. */
static void gated_child(const char *const *argv, int out_fd, int gate_rd, int gate_wr,
                        const int *hold_fd)
{
	static const int dfl[] = {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD};
	struct sigaction sa = {.sa_handler = SIG_DFL};
	sigset_t none;
	ssize_t r;
	char go;
	int in, hold = -1;

	close(gate_wr);
	/* Above the standard fds first, so that the dup2s below cannot
	 * overwrite them (a parent started with fd 0 closed gets low fds). */
	out_fd = fcntl(out_fd, F_DUPFD, 10);
	gate_rd = fcntl(gate_rd, F_DUPFD, 10);
	if (hold_fd != NULL)
		hold = fcntl(*hold_fd, F_DUPFD, 10);
	if (out_fd < 0 || gate_rd < 0 || (hold_fd != NULL && hold < 0) || setsid() < 0)
		_exit(126);
	for (size_t i = 0; i < ARRAY_LEN(dfl); i++)
		(void)sigaction(dfl[i], &sa, NULL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0 || dup2(in, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0 ||
	    dup2(gate_rd, 3) < 0 || (hold >= 0 && dup2(hold, 4) < 0))
		_exit(126);
	/* Nothing else of the parent's: another gated child must see its EOF
	 * even while we wait for ours. dup2 cleared close-on-exec on fd 4. */
	(void)close_range(hold >= 0 ? 5 : 4, ~0U, 0);
	do
		r = read(3, &go, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1)
		_exit(126);
	close(3);
	execve(argv[0], (char *const *)argv, environ);
	_exit(127);
}

/* Forks a child that waits until the gate has recorded its pid. A kill -9
 * of us between the start and the record can then never leave a child
 * running that nobody knows about. */
static enum nv_err spawn_gated(const char *const *argv, int out_fd,
                               const struct host_spawn_gate *gate, pid_t *out)
{
	int gfd[2];
	enum nv_err rc;
	pid_t pid;

	if (access(argv[0], X_OK) != 0)
		return NV_E_IO;
	if (pipe2(gfd, O_CLOEXEC) != 0)
		return NV_E_IO;
	pid = fork();
	if (pid < 0) {
		close(gfd[0]);
		close(gfd[1]);
		return NV_E_IO;
	}
	if (pid == 0)
		gated_child(argv, out_fd, gfd[0], gfd[1], gate->hold_fd);
	close(gfd[0]);
	rc = gate->record(gate->arg, pid);
	if (rc == NV_OK && write(gfd[1], "g", 1) != 1)
		rc = NV_E_IO;
	close(gfd[1]);
	if (rc != NV_OK) {
		kill(pid, SIGKILL); /* it has not executed argv; make sure it never does */
		(void)waitpid(pid, NULL, 0);
		return rc;
	}
	*out = pid;
	return NV_OK;
}

static enum nv_err real_spawn(struct host *h, const char *const *argv, const char *log_path,
                              const struct host_spawn_gate *gate, pid_t *pid)
{
	enum nv_err rc;
	int fd;

	(void)h;
	fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
	          0644);
	if (fd < 0)
		return NV_E_IO;
	if (gate != NULL)
		rc = spawn_gated(argv, fd, gate, pid);
	else
		rc = spawn_with(argv, fd, POSIX_SPAWN_SETSID, pid);
	close(fd);
	return rc;
}

static enum nv_err real_mknod_chr(struct host *h, const char *path, unsigned major, unsigned minor,
                                  unsigned mode)
{
	(void)h;
	if (mknod(path, S_IFCHR | (mode_t)mode, makedev(major, minor)) != 0)
		return errno == EEXIST ? NV_E_EXISTS : NV_E_IO;
	if (chmod(path, (mode_t)mode) != 0)
		return NV_E_IO;
	return NV_OK;
}

const struct host_ops host_real_ops = {
        .name = "real",
        .nvml_read = host_nvml_real_read,
        .run = real_run,
        .spawn = real_spawn,
        .mknod_chr = real_mknod_chr,
};

enum nv_err host_tool_run(struct host *h, const char *const *argv, size_t cap,
                          struct host_run_result *res)
{
	enum nv_err rc = h->ops->run(h, argv, h->cfg.tool_timeout_ms, cap, res);

	if (rc == NV_E_TIMEOUT) {
		host_fail(h, "%s timed out after %lld ms", argv[0],
		          (long long)h->cfg.tool_timeout_ms);
		return rc;
	}
	if (rc != NV_OK) {
		host_fail(h, "%s could not be started", argv[0]);
		return rc;
	}
	if (res->exit_code != 0) {
		const char *o = buf_str(&res->out);
		host_fail(h, "%s exited with %d: %.*s", argv[0], res->exit_code,
		          (int)strcspn(o, "\n"), o);
		return NV_E_IO;
	}
	return NV_OK;
}

bool host_pid_alive(pid_t pid)
{
	char path[64], st[512];
	ssize_t r;
	int fd;
	const char *p;

	if (pid <= 0)
		return false;
	if (waitpid(pid, NULL, WNOHANG) == pid)
		return false;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	r = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (r <= 0)
		return false;
	st[r] = '\0';
	p = strrchr(st, ')');
	return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

enum nv_err host_pid_record(void *arg, pid_t pid)
{
	struct host_pid_rec *r = arg;
	char line[256];
	int n;

	n = snprintf(line, sizeof(line), "%d %llu %s\n", (int)pid, host_pid_starttime(pid), r->tag);
	if (n < 0 || (size_t)n >= sizeof(line))
		return NV_E_TOO_LARGE;
	if (host_file_write_atomic(r->path, line, (size_t)n, 0644) != NV_OK) {
		r->err = errno;
		return NV_E_IO;
	}
	r->written = true;
	return NV_OK;
}

unsigned long long host_pid_starttime(pid_t pid)
{
	char path[64], st[1024];
	ssize_t r;
	char num[32];
	int fd, field = 2;
	const char *p;
	uint64_t v;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	r = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (r <= 0)
		return 0;
	st[r] = '\0';
	p = strrchr(st, ')');
	if (p == NULL)
		return 0;
	/* Fields after the command: 3 is the state, 22 the start time. */
	while (*p != '\0' && field < 22) {
		if (*p == ' ')
			field++;
		p++;
	}
	n = strcspn(p, " ");
	if (n == 0 || n >= sizeof(num))
		return 0;
	memcpy(num, p, n);
	num[n] = '\0';
	return parse_u64(num, 1, UINT64_MAX, &v) == NV_OK ? v : 0;
}

void host_pid_stop(pid_t pid, int64_t grace_ms)
{
	int64_t deadline = time_mono_ms() + grace_ms;

	if (!host_pid_alive(pid))
		return;
	kill(pid, SIGTERM);
	while (host_pid_alive(pid) && time_mono_ms() < deadline)
		time_sleep_ms(10);
	if (!host_pid_alive(pid))
		return;
	kill(pid, SIGKILL);
	deadline = time_mono_ms() + 2000;
	while (host_pid_alive(pid) && time_mono_ms() < deadline)
		time_sleep_ms(5);
}
