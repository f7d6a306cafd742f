/* SPDX-License-Identifier: MIT */
/*
 * shortcut off, on      the kill switch
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "rundir.h"
#include "shortcut.h"

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
	int status;
	const char *dir = sc__cli_rundir(&status);
	if (!dir)
		return status;
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
			sc__each_live_file(d, count_shm, &left);
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
