/* SPDX-License-Identifier: MIT */
/* Subcommands of the shortcut tool: each gets argv from its own name on. */
#ifndef SHORTCUT_CLI_H
#define SHORTCUT_CLI_H

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h"

/*
 * shortcut perf pingpong|stream --size N [...]: argv[0] is "perf".
 * Returns the exit status: 0, 1 (a transport failed) or 2 (bad usage).
 */
int sc__perf_main(int argc, char **argv);
/* shortcut perf devmem [...] (perf_devmem.c): argv[0] is "devmem". */
int sc__perf_devmem_main(int argc, char **argv);
/* shortcut run CMD [ARGS...]: exec CMD with libshortcut.so preloaded. */
int sc__run_main(int argc, char **argv);
/* shortcut stat [--json] (stat.c): live connections of running processes. */
int sc__stat_main(int argc, char **argv);
/* shortcut stats [--json] [--reset] (stat.c): counters of the run directory. */
int sc__stats_main(int argc, char **argv);
/* `shortcut off` / `shortcut on` (off.c) */
int sc__off_main(int argc, char **argv, bool off);
/* shortcut doctor [--json] [PROGRAM] (doctor.c): 0 all fine, 1 not, 2 usage. */
int sc__doctor_main(int argc, char **argv);
/* shortcut cdi [...] (cdi.c): a CDI spec for containers: 0, 1 (cannot
 * write it), 2 (bad usage). */
int sc__cdi_main(int argc, char **argv);

/* The run directory's stats files read (statsread.c): any process of the
 * user may have written them, or died writing. */
struct sc_stats_file;
struct sc_stats_retired;
/* s as a JSON string on stdout: quoted, '"', '\\', control characters and
 * bytes outside ASCII escaped (a process name set by prctl may hold any). */
void sc__json_str(const char *s);
/* f's process is alive: its identity (procs.c), whatever PID namespace
 * either of us is in. */
bool sc__stats_file_live(const struct sc_stats_file *f);
/* Pids for people (pidview.c): the pid by which this viewer names the
 * process of identity ident (recorded: the pid it has in its own PID
 * namespace); *foreign if it cannot (another PID namespace that it does
 * not see: the recorded pid is returned).  sc__pid_str: as text, a
 * foreign pid in brackets. */
int32_t sc__pid_view(uint64_t ident, int32_t recorded, bool *foreign);
const char *sc__pid_str(uint64_t ident, int32_t recorded, char *buf, size_t len);
/* `shortcut stat`: one line (a JSON object) per connection record of f;
 * *n counts them (the separator of the JSON list). */
void sc__stat_list(const struct sc_stats_file *f, bool json, int *n);
/* Connection records of f on shared memory (`shortcut off` waits for 0). */
int sc__stat_shm_conns(const struct sc_stats_file *f);
/* The run directory for a command that reads or writes it (stat, stats,
 * off, on): the configuration checked first.  NULL after saying why on
 * stderr, with *status the command's exit status (2 a bad setting, 1 an
 * unusable directory). */
const char *sc__cli_rundir(int *status);
/* fn(file, arg) for the stats file of every live process of the run
 * directory d (stat.c). */
void sc__each_live_file(DIR *d, void (*fn)(const struct sc_stats_file *, void *), void *arg);
/* `shortcut stats`: the counters summed, as struct sc_counters, over the
 * files (procs) of processes live or not, and the retired counters.  Any
 * count a file holds may be garbage: the sums wrap, as unsigned ones do (an
 * int here overflowed on a stats-retired claiming INT_MAX processes). */
struct sc_stats_sum {
	uint64_t c[sizeof(struct sc_counters) / 8];
	unsigned long long procs, live;
};
void sc__stats_add_file(struct sc_stats_sum *s, const struct sc_stats_file *f, bool live);
void sc__stats_add_retired(struct sc_stats_sum *s, const struct sc_stats_retired *r);
/* The sums as a table, JSON or Prometheus text; returns the exit status. */
int sc__stats_print(const char *dir, const struct sc_stats_sum *s, bool json, bool prom);

/* `shortcut config` (config.c): the exit status. */
int sc__config_main(void);

/* The library `shortcut run` preloads (run.c): 0 and its path, or -errno. */
int sc__find_lib(char *out, size_t len);

/* The counters of src/core/counters.def as `shortcut stats` prints them
 * (countertab.c), in the order declared. */
struct sc_counter_desc {
	size_t off;             /* in struct sc_counters */
	const char *json, *group;       /* its JSON key, and object (NULL: top level) */
	const char *family, *labels, *type, *help;      /* Prometheus */
};
extern const struct sc_counter_desc sc__counter_descs[];
extern const size_t sc__ncounter_descs;
unsigned long long sc__counter_value(const struct sc_counters *s, const struct sc_counter_desc *d);
/* d is the first entry of its Prometheus family (by_family) or JSON object */
bool sc__counter_first(const struct sc_counter_desc *d, bool by_family);

/* `shortcut stats --prometheus` (prometheus.c): the summed counters of the
 * run directory dir (procs files, live of them running) in the Prometheus
 * text exposition format.  Returns the exit status. */
int sc__stats_prometheus(const char *dir, unsigned long long procs, unsigned long long live,
			 const struct sc_counters *s);

/* Why the loader will not preload libshortcut into a program (target.c). */
#define SC_TARGET_FINDINGS 6
struct sc_target {
	char path[PATH_MAX];            /* the file exec runs (PATH searched) */
	int n;                          /* findings: none means it will */
	char note[200];                 /* with none: what else it will do ("" if nothing) */
	struct {
		char what[400];         /* what is wrong and what it means */
		char fix[160];          /* what to do about it */
	} f[SC_TARGET_FINDINGS];
};
/* 0 with t filled, or -errno when prog cannot be found or read. */
int sc__target_check(const char *prog, struct sc_target *t);

#endif /* SHORTCUT_CLI_H */
