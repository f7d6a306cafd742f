/* SPDX-License-Identifier: MIT */
/* The `shortcut` command: entry point and sub-command dispatch. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "shortcut.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shortcut <command> [options]\n"
		"\n"
		"commands:\n"
		"  perf pingpong|stream --size N [--seconds S] [--spin-us U] [--reps R] [--json]\n"
		"  perf devmem [--size N] [--seconds S] [--reps R] [--json]\n"
		"          side-by-side benchmark: kernel TCP loopback, Unix socket, shortcut,\n"
		"          and the machine's physical references (shared-memory ping-pong, memcpy)\n"
		"  run CMD [ARGS...]\n"
		"          run CMD with the interposer: its TCP connections to other\n"
		"          accelerated processes on this host use shared memory\n"
		"  stat [--json]\n"
		"          live TCP connections of running processes: mode (shm, tcp,\n"
		"          pending), addresses, peer process or fallback reason, bytes\n"
		"  stats [--json | --prometheus | --reset]\n"
		"          counters and fallback reasons of every process in the run directory\n"
		"          (--prometheus: the Prometheus text format, for node_exporter)\n"
		"  doctor [--json] [PROGRAM]\n"
		"          check what acceleration needs on this host, one line each with\n"
		"          its fix; PROGRAM: whether the loader will preload into it\n"
		"  off [--wait S]\n"
		"          kill switch: running processes switch their accelerated\n"
		"          connections back to TCP and accelerate no new ones (waits up\n"
		"          to S seconds, default 5, until none is left on shared memory)\n"
		"  on      accelerate new connections again\n"
		"  cdi [--lib P] [--bin P] [--rundir D] [--name N] [--output F] [--install]\n"
		"          a Container Device Interface spec: podman run --device\n"
		"          shortcut.dev/run=default gives a container the library and a shared\n"
		"          run directory (--install: the directory and /etc/cdi/shortcut.json)\n"
		"  config  validate the SHORTCUT_* environment (exit 2 with the reason if invalid)\n"
		"          and print every setting in effect\n"
		"  help    this text (--help)\n"
		"  version the version (--version)\n"
		"\n"
		"exit status: 0 success, 1 failure (doctor: a check not ok), 2 bad usage;\n"
		"run: the program's own (127: it could not be run)\n"
		"man pages: shortcut(1), shortcut(7), libshortcut(3)\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "perf"))
		return sc__perf_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "run"))
		return sc__run_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stat"))
		return sc__stat_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stats"))
		return sc__stats_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "off") || !strcmp(argv[1], "on"))
		return sc__off_main(argc - 1, argv + 1, argv[1][1] == 'f');
	if (!strcmp(argv[1], "config"))
		return sc__config_main();
	if (!strcmp(argv[1], "doctor"))
		return sc__doctor_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "cdi"))
		return sc__cdi_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("shortcut %s\n", SC_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "shortcut: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
