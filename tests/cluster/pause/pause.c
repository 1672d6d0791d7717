// SPDX-License-Identifier: Apache-2.0
// The sandbox ("pause") process of the test node's pods: it holds the pod's
// namespaces, reaps orphans and exits on SIGTERM or SIGINT. Built static so
// its image needs no other file.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void pause_on_term(int sig)
{
	(void)sig;
	_exit(0);
}

static void pause_on_child(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(void)
{
	struct sigaction term = {.sa_handler = pause_on_term};
	struct sigaction child = {.sa_handler = pause_on_child, .sa_flags = SA_NOCLDSTOP};

	if (sigaction(SIGTERM, &term, NULL) != 0 || sigaction(SIGINT, &term, NULL) != 0 ||
	    sigaction(SIGCHLD, &child, NULL) != 0)
		return EXIT_FAILURE;
	for (;;)
		pause();
}
