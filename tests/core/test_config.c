/* SPDX-License-Identifier: MIT */
/*
 * Configuration: sc_config_check() validates SHORTCUT_* variables.  Each
 * case runs in a fresh child (the library reads them once) with stderr
 * captured: an invalid value gives -EINVAL and exactly one line on stderr
 * naming the variable; valid settings give 0 and print nothing.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "t_util.h"

extern char **environ;

struct cfg_case {
	const char *var, *val;  /* var NULL: no SHORTCUT_* variable at all */
	int expect;             /* 0 or -EINVAL */
	int err_fd;             /* write end of the stderr pipe */
	int rd_fd;
};

static void clear_shortcut_env(void)
{
	for (;;) {
		char name[256];
		int found = 0;

		for (char **e = environ; *e; e++) {
			if (strncmp(*e, "SHORTCUT_", 9) == 0) {
				size_t n = strcspn(*e, "=");

				if (n >= sizeof name)
					n = sizeof name - 1;
				memcpy(name, *e, n);
				name[n] = 0;
				found = 1;
				break;
			}
		}
		if (!found)
			return;
		unsetenv(name);
	}
}

static int child(void *arg)
{
	struct cfg_case *cc = arg;
	int r;

	close(cc->rd_fd);
	clear_shortcut_env();
	if (cc->var)
		setenv(cc->var, cc->val, 1);
	if (dup2(cc->err_fd, 2) < 0)
		return 100;
	close(cc->err_fd);
	r = sc_config_check();
	/* the result is stable */
	if (sc_config_check() != r)
		return 101;
	fflush(stderr);
	return r == 0 ? 0 : r == -EINVAL ? 22 : r < 0 && r > -100 ? -r : 102;
}

static void run(const char *var, const char *val, int expect)
{
	struct cfg_case cc = { var, val, expect, -1, -1 };
	int p[2], st, lines = 0;
	char out[4096];
	size_t len = 0;
	pid_t pid;

	t_log("config: %s%s%s -> %s%s", var ? var : "(no SHORTCUT_* variables)",
	      var ? "=" : "", var ? val : "", expect ? "-EINVAL" : "0",
	      expect ? " and one line on stderr naming it" : ", silent");
	T_EQ(pipe(p), 0);
	cc.rd_fd = p[0];
	cc.err_fd = p[1];
	pid = t_fork(child, &cc);
	close(p[1]);
	for (;;) {
		ssize_t n = read(p[0], out + len, sizeof out - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		T_ASSERT(n >= 0);
		if (n == 0)
			break;
		len += (size_t)n;
		T_ASSERT(len < sizeof out - 1);
	}
	out[len] = 0;
	close(p[0]);
	st = t_wait_status(pid);
	printf("    stderr: %s", len ? out : "(empty)\n");
	if (len && out[len - 1] != '\n')
		putchar('\n');
	T_ASSERTF(WIFEXITED(st), "child %s", t_status_str(st));
	switch (WEXITSTATUS(st)) {
	case 100: T_FAIL("dup2 failed in the child");
	case 101: T_FAIL("sc_config_check gave different results on two calls");
	case 102: T_FAIL("sc_config_check returned an unexpected value");
	default: break;
	}
	if (expect == 0) {
		T_ASSERTF(WEXITSTATUS(st) == 0, "sc_config_check returned -%d (%s), want 0",
			  WEXITSTATUS(st), strerror(WEXITSTATUS(st)));
		T_ASSERTF(len == 0, "unexpected stderr output: %s", out);
		return;
	}
	T_ASSERTF(WEXITSTATUS(st) == EINVAL, "sc_config_check returned %s%d, want -EINVAL",
		  WEXITSTATUS(st) ? "-" : "", WEXITSTATUS(st));
	for (size_t i = 0; i < len; i++)
		lines += out[i] == '\n';
	T_ASSERTF(strstr(out, var) != NULL, "stderr does not name %s: %s", var, out);
	T_ASSERTF(lines == 1 && out[len - 1] == '\n',
		  "want exactly one line on stderr, got %d (%zu bytes)", lines, len);
}

T_TEST(none)
{
	run(NULL, NULL, 0);
}

T_TEST(bufs)
{
	run("SHORTCUT_RMEM", "65536", 0);
	run("SHORTCUT_WMEM", "65536", 0);
	run("SHORTCUT_RMEM", "1", -EINVAL);
	run("SHORTCUT_WMEM", "1", -EINVAL);
}

T_TEST(spin_us)
{
	run("SHORTCUT_SPIN_US", "abc", -EINVAL);
}

T_TEST(max_conns)
{
	run("SHORTCUT_MAX_CONNS", "0", -EINVAL);
}

/* SHORTCUT_GROUP: a group we are in (our own, by number), not one that
 * does not exist, nor one we are not in */
T_TEST(group)
{
	char gid[16];
	snprintf(gid, sizeof(gid), "%u", (unsigned)getegid());
	run("SHORTCUT_GROUP", gid, 0);
	run("SHORTCUT_GROUP", "no-such-group-sc", -EINVAL);
	run("SHORTCUT_GROUP", "", -EINVAL);
	gid_t g[256];
	int n = getgroups(256, g);
	for (unsigned cand = 60000; cand < 60100; cand++) {
		bool mine = cand == (unsigned)getegid();
		for (int i = 0; i < n; i++)
			mine |= (unsigned)g[i] == cand;
		if (!mine) {
			snprintf(gid, sizeof(gid), "%u", cand);
			run("SHORTCUT_GROUP", gid, -EINVAL);
			break;
		}
	}
}

T_MAIN(NULL,
       T_ENTRY(none),
       T_ENTRY(bufs),
       T_ENTRY(spin_us),
       T_ENTRY(max_conns),
       T_ENTRY(group))
