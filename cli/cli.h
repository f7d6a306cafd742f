/* SPDX-License-Identifier: MIT */
/* Subcommands of the shortcut tool: each gets argv from its own name on. */
#ifndef SHORTCUT_CLI_H
#define SHORTCUT_CLI_H

#include <stdbool.h>

/*
 * shortcut perf pingpong|stream --size N [...]: argv[0] is "perf".
 * Returns the exit status: 0, 1 (a transport failed) or 2 (bad usage).
 */
int sc__perf_main(int argc, char **argv);
/* shortcut perf devmem [...] (perf_devmem.c): argv[0] is "devmem". */
int sc__perf_devmem_main(int argc, char **argv);
/* shortcut run CMD [ARGS...]: exec CMD with libshortcut.so preloaded. */
int sc__run_main(int argc, char **argv);
/* shortcut stat [--json]: live connections of running processes. */
int sc__stat_main(int argc, char **argv);
/* shortcut stats [--json] [--reset]: counters of the run directory. */
int sc__stats_main(int argc, char **argv);
/* `shortcut off` / `shortcut on` */
int sc__off_main(int argc, char **argv, bool off);

#endif /* SHORTCUT_CLI_H */
