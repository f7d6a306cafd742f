/* SPDX-License-Identifier: MIT */
/*
 * shortcut stat, stats  the stats files of the run directory (each file
 *                       read by statsread.c)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdatomic.h>

#include "cli.h"
#include "rundir.h"
#include "shortcut.h"
#include "stats.h"

/* Call fn for the stats file of every live process in the run directory
 * (`stat`, and `off` waiting for the connections to leave). */
void sc__each_live_file(DIR *d, void (*fn)(const struct sc_stats_file *, void *), void *arg)
{
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "stats-", 6))
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_size != sizeof(struct sc_stats_file)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		struct sc_stats_file *f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (f == MAP_FAILED)
			continue;
		if (f->magic == SC_STATS_MAGIC && f->version == SC_STATS_VERSION && sc__stats_file_live(f))
			fn(f, arg);
		munmap(f, sizeof(*f));
	}
}

/* shortcut stat: the live connections of every running process (smcss). */
struct stat_ctx {
	bool json;
	int n;
};

static void stat_file(const struct sc_stats_file *f, void *arg)
{
	struct stat_ctx *x = arg;
	sc__stat_list(f, x->json, &x->n);
}

int sc__stat_main(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 2 || (argc == 2 && !json)) {
		fprintf(stderr, "usage: shortcut stat [--json]\n");
		return 2;
	}
	int status;
	const char *dir = sc__cli_rundir(&status);
	DIR *d = dir ? opendir(dir) : NULL;
	if (!dir)
		return status;
	if (!d) {
		fprintf(stderr, "shortcut: run directory %s: %s\n", dir, strerror(errno));
		return 1;
	}
	struct stat_ctx ctx = { .json = json };
	if (json)
		printf("[");
	else
		printf("%-8s %-15s %5s %-8s %-24s %-24s %-22s %12s %12s\n", "PID", "COMMAND", "FD",
		       "MODE", "LOCAL", "PEER", "PEER PID / REASON", "SENT", "RECEIVED");
	sc__each_live_file(d, stat_file, &ctx);
	closedir(d);
	if (json)
		printf("]\n");
	return 0;
}

int sc__stats_main(int argc, char **argv)
{
	bool json = false, reset = false, prom = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--prometheus"))
			prom = true;
		else if (!strcmp(argv[i], "--reset"))
			reset = true;
		else {
			fprintf(stderr, "shortcut stats: unknown option '%s' (options: --json, "
				"--prometheus, --reset)\n"
				"usage: shortcut stats [--json | --prometheus] [--reset]\n", argv[i]);
			return 2;
		}
	}
	if (json + prom + reset > 1) {
		fprintf(stderr, "shortcut stats: --json, --prometheus and --reset exclude each other\n"
			"usage: shortcut stats [--json | --prometheus | --reset]\n");
		return 2;
	}
	int status;
	const char *dir = sc__cli_rundir(&status);
	if (!dir)
		return status;
	/* the files of dead processes go into stats-retired first */
	sc__stats_collect(true);
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "shortcut: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	struct sc_stats_sum sum = { .procs = 0 };
	/* the retired counters and the live files, read under the lock a
	 * collection takes (a file is in one or the other) */
	int lfd = openat(dirfd(d), SC_RETIRED_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (lfd >= 0)
		flock(lfd, reset ? LOCK_EX : LOCK_SH);
	struct sc_stats_retired *ret = sc__stats_retired(NULL);
	if (ret && reset) {
		_Atomic uint64_t *c = (_Atomic uint64_t *)&ret->c;
		for (size_t i = 0; i < sizeof(sum.c) / 8; i++)
			atomic_store(&c[i], 0);
		ret->processes = 0;
	} else if (ret) {
		sc__stats_add_retired(&sum, ret);
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "stats-", 6))
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_size != sizeof(struct sc_stats_file)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		struct sc_stats_file *f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE,
					       MAP_SHARED, fd, 0);
		close(fd);
		if (f == MAP_FAILED)
			continue;
		if (__atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) == SC_STATS_MAGIC) {
			bool up = sc__stats_file_live(f);
			if (!reset) {
				sc__stats_add_file(&sum, f, up);
			} else if (up) {
				_Atomic uint64_t *c = (_Atomic uint64_t *)&f->c;
				for (size_t i = 0; i < sizeof(sum.c) / 8; i++)
					atomic_store(&c[i], 0);
				sum.procs++;
			} else {
				unlinkat(dirfd(d), e->d_name, 0);
				sum.procs++;
			}
		}
		munmap(f, sizeof(*f));
	}
	if (lfd >= 0)
		close(lfd);
	closedir(d);
	if (reset) {
		printf("counters reset (%llu processes)\n", sum.procs);
		return 0;
	}
	return sc__stats_print(dir, &sum, json, prom);
}
