// SPDX-License-Identifier: Apache-2.0
// kubectl-nvl72: the kubectl plugin (`kubectl nvl72 ...`). Everything but
// the exit lives in src/cli/; `--help-markdown` prints the reference section
// of docs/kubectl-plugin.md from the same table as --help.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/cli.h"

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--help-markdown") == 0) {
		struct buf b;
		buf_init(&b, (size_t)1 << 20);
		cli_help_markdown(&b);
		fputs(buf_str(&b), stdout);
		buf_clear(&b);
		return 0;
	}
	return cli_run(argc, argv, stdout, stderr);
}
