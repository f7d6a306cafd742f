/* SPDX-License-Identifier: MIT */
/*
 * shortcut run CMD...   run a program with the interposer preloaded
 * shortcut stat, stats  the stats files of the run directory (each file
 *                       read by statsread.c)
 * shortcut off, on      the kill switch
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The library `shortcut run` preloads: libshortcut.so beside the binary
 * (the build tree), else the installed one, SC_LIBDIR_REL from the
 * binary's folder (PREFIX/bin/shortcut -> PREFIX/lib/libshortcut.so.0), so
 * that a prefix moved as a whole (an extracted package) still finds its
 * own.  0 and the path in out, or -ENOENT (-errno of /proc/self/exe). */
int sc__find_lib(char *out, size_t len)
{
	char exe[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	if (snprintf(out, len, "%s/libshortcut.so", exe) < (int)len && access(out, R_OK) == 0)
		return 0;
	char rel[PATH_MAX], dir[PATH_MAX];
	if (snprintf(rel, sizeof(rel), "%s/%s", exe, SC_LIBDIR_REL) >= (int)sizeof(rel) ||
	    !realpath(rel, dir))
		return -ENOENT;
	if (snprintf(out, len, "%s/%s", dir, SC_SONAME) < (int)len && access(out, R_OK) == 0)
		return 0;
	return -ENOENT;
}

static int run_usage(FILE *f, int status)
{
	fputs("usage: shortcut run [-v|-vv|-vvv] [--off] [--] CMD [ARGS...]\n"
	      "  -v, -vv, -vvv  log each connection's outcome (SHORTCUT_LOG=1, 2, 3) to stderr\n"
	      "  --off          leave every connection on TCP (SHORTCUT_DISABLE=1)\n", f);
	return status;
}

int sc__run_main(int argc, char **argv)
{
	char lib[PATH_MAX], pre[2 * PATH_MAX + 2];
	int i = 1;

	/* our options come before the command; the command's are its own */
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			return run_usage(stdout, 0);
		} else if (!strcmp(a, "--off")) {
			setenv("SHORTCUT_DISABLE", "1", 1);
		} else if (!strcmp(a, "-v") || !strcmp(a, "-vv") || !strcmp(a, "-vvv")) {
			char lv[2] = { (char)('0' + (int)strlen(a) - 1), 0 };
			setenv("SHORTCUT_LOG", lv, 1);
		} else {
			fprintf(stderr, "shortcut run: unknown option %s\n", a);
			return run_usage(stderr, 2);
		}
	}
	if (i >= argc)
		return run_usage(stderr, 2);
	if (sc_config_check())
		return 2;
	if (sc__find_lib(lib, sizeof(lib))) {
		fprintf(stderr, "shortcut: %s not found beside the shortcut binary nor in %s from "
			"it; reinstall (make install, or the package)\n", SC_SONAME, SC_LIBDIR_REL);
		return 1;
	}
	/* a program the loader will not preload into runs, but not silently */
	struct sc_target t;
	if (sc__target_check(argv[i], &t) == 0)
		for (int k = 0; k < t.n; k++)
			fprintf(stderr, "shortcut: warning: %s: %s\n", t.path, t.f[k].what);
	const char *old = getenv("LD_PRELOAD");
	if (old && *old)
		snprintf(pre, sizeof(pre), "%s:%s", lib, old);
	else
		snprintf(pre, sizeof(pre), "%s", lib);
	setenv("LD_PRELOAD", pre, 1);
	execvp(argv[i], argv + i);
	fprintf(stderr, "shortcut: cannot run %s: %s\n", argv[i], strerror(errno));
	return 127;
}

/* shortcut stat: the live connections of every running process (smcss). */
/* Call fn for the stats file of every live process in the run directory. */
static void each_live_file(DIR *d, void (*fn)(const struct sc_stats_file *, void *), void *arg)
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

struct stat_ctx {
	bool json;
	int n;
};

static void stat_file(const struct sc_stats_file *f, void *arg)
{
	struct stat_ctx *x = arg;
	sc__stat_list(f, x->json, &x->n);
}

/* Live connections on shared memory (records in mode shm). */
static void count_shm(const struct sc_stats_file *f, void *arg)
{
	*(int *)arg += sc__stat_shm_conns(f);
}

/* `shortcut off [--wait S]` / `shortcut on`: the run directory's kill
 * switch.  Processes watch for the file (their switch thread): while it
 * exists, new connections stay on TCP and live ones switch back. */
int sc__off_main(int argc, char **argv, bool off)
{
	double wait_s = 5;
	if (off && argc == 3 && !strcmp(argv[1], "--wait")) {
		char *end;
		wait_s = strtod(argv[2], &end);
		if (*end || wait_s < 0 || wait_s > 3600) {
			fprintf(stderr, "shortcut off: --wait takes seconds, 0 to 3600 (got '%s')\n",
				argv[2]);
			return 2;
		}
	} else if (argc != 1) {
		fprintf(stderr, "usage: shortcut %s\n", off ? "off [--wait SECONDS]" : "on");
		return 2;
	}
	if (sc_config_check())
		return 2;
	const char *dir = sc__rundir();
	if (!dir) {
		fprintf(stderr, "shortcut: run directory unusable: %s\n", sc__rundir_error());
		return 1;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, SC_OFF_FILE);
	if (!off) {
		if (unlink(path) < 0 && errno != ENOENT) {
			fprintf(stderr, "shortcut on: %s: %s\n", path, strerror(errno));
			return 1;
		}
		printf("acceleration on (new connections)\n");
		return 0;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		fprintf(stderr, "shortcut off: %s: %s\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	/* the processes switch their connections: wait until none is left */
	int left = 0;
	for (double t = 0;; t += 0.05) {
		DIR *d = opendir(dir);
		left = 0;
		if (d) {
			each_live_file(d, count_shm, &left);
			closedir(d);
		}
		if (!left || t >= wait_s)
			break;
		usleep(50000);
	}
	if (left) {
		printf("acceleration off; %d connections still on shared memory\n", left);
		return 1;
	}
	printf("acceleration off: every connection is on TCP\n");
	return 0;
}

int sc__stat_main(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 2 || (argc == 2 && !json)) {
		fprintf(stderr, "usage: shortcut stat [--json]\n");
		return 2;
	}
	if (sc_config_check())
		return 2;
	const char *dir = sc__rundir();
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d) {
		fprintf(stderr, "shortcut: run directory unusable: %s\n", sc__rundir_error());
		return 1;
	}
	struct stat_ctx ctx = { .json = json };
	if (json)
		printf("[");
	else
		printf("%-8s %-15s %5s %-8s %-24s %-24s %-22s %12s %12s\n", "PID", "COMMAND", "FD",
		       "MODE", "LOCAL", "PEER", "PEER PID / REASON", "SENT", "RECEIVED");
	each_live_file(d, stat_file, &ctx);
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
	if (sc_config_check())
		return 2;
	const char *dir = sc__rundir();
	if (!dir) {
		fprintf(stderr, "shortcut: run directory unusable: %s\n", sc__rundir_error());
		return 1;
	}
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
