/* SPDX-License-Identifier: MIT */
/*
 * shortcut run CMD...   run a program with the interposer preloaded
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "shortcut.h"

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
