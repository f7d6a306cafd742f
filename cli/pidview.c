/* SPDX-License-Identifier: MIT */
/*
 * Pids for people: a process of the run directory is known by its
 * identity (procs.c), and shown by the pid the viewer can name it by.  A
 * process in another PID namespace (a container's) has, in its file, the
 * pid it has there -- every container's first process is pid 1.  The
 * viewer finds its own pid for it in /proc: the process whose PID
 * namespace is the recorded one and whose innermost pid (NSpid's last) is
 * the recorded pid; a viewer that cannot see that namespace (a container
 * looking at the host, or at another container) shows the recorded pid
 * marked foreign.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "rundir.h"

/* The processes this viewer sees in other PID namespaces (read once). */
static struct seen {
	uint64_t pidns;
	int32_t inner, here;
} *seen;
static size_t nseen;
static bool scanned;
static uint64_t my_pidns;

/* /proc/P/status's NSpid: its innermost pid (the last field), 0 if none. */
static int32_t inner_pid(const char *p)
{
	char path[300], buf[4096];
	snprintf(path, sizeof(path), "/proc/%s/status", p);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *l = strstr(buf, "\nNSpid:");
	if (!l)
		return 0;
	char *end = strchr(l + 1, '\n');
	if (end)
		*end = 0;
	char *last = strrchr(l, '\t');
	return last ? (int32_t)atoi(last + 1) : 0;
}

static void scan(void)
{
	struct stat st;
	scanned = true;
	if (stat("/proc/self/ns/pid", &st) == 0)
		my_pidns = (uint64_t)st.st_ino;
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *e;
	size_t cap = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s/ns/pid", e->d_name);
		if (stat(path, &st) < 0 || (uint64_t)st.st_ino == my_pidns)
			continue;       /* (ours: the recorded pid is the viewer's) */
		if (nseen == cap) {
			cap = cap ? 2 * cap : 64;
			struct seen *n = realloc(seen, cap * sizeof(*seen));
			if (!n)
				break;
			seen = n;
		}
		seen[nseen++] = (struct seen){ (uint64_t)st.st_ino, inner_pid(e->d_name),
					       (int32_t)atoi(e->d_name) };
	}
	closedir(d);
}

int32_t sc__pid_view(uint64_t ident, int32_t recorded, bool *foreign)
{
	struct sc_proc p;
	*foreign = false;
	if (!scanned)
		scan();
	if (!ident || sc__proc_info(ident, &p) < 0 || !p.pidns || p.pidns == my_pidns)
		return recorded;
	for (size_t i = 0; i < nseen; i++)
		if (seen[i].pidns == p.pidns && seen[i].inner == p.pid)
			return seen[i].here;
	*foreign = true;
	return p.pid;
}

const char *sc__pid_str(uint64_t ident, int32_t recorded, char *buf, size_t len)
{
	bool foreign;
	int32_t pid = sc__pid_view(ident, recorded, &foreign);
	snprintf(buf, len, foreign ? "[%d]" : "%d", (int)pid);
	return buf;
}
