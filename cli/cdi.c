/* SPDX-License-Identifier: MIT */
/*
 * shortcut cdi [--lib PATH] [--bin PATH] [--rundir DIR] [--name NAME]
 *              [--output FILE] [--install]
 *
 * A Container Device Interface spec (CDI 0.5.0, JSON) of kind
 * shortcut.dev/run: its device (NAME, default "default") gives a container
 * what acceleration needs, the way container engines add a GPU --
 *
 *     podman run --device shortcut.dev/run=default IMAGE ...
 *
 * (Docker 25 and later, containerd 1.7, CRI-O, so Kubernetes through
 * them): the library bind-mounted read-only and preloaded (LD_PRELOAD),
 * the shortcut binary read-only, and the host's run directory bind-mounted
 * at /run/shortcut (SHORTCUT_RUNDIR), shared by every container given the
 * device and by the host's own programs run with the same directory.
 * Inside, everything is under /opt/shortcut, laid out as installed
 * (bin/shortcut and the library where `shortcut run` looks from there), so
 * nothing of the image is shadowed.
 *
 * The spec's version is 0.5.0, the newest that Podman 4.3 (Debian 12)
 * reads (it ignores a spec of a later version whole); later readers read
 * it too.  --install creates the run directory (mode 0700: the library
 * refuses one that others may write) and writes /etc/cdi/shortcut.json,
 * replacing it whole (a rename: an engine never reads half of it).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define CDI_VERSION "0.5.0"
#define CDI_KIND "shortcut.dev/run"
#define CDI_DEFAULT_SPEC "/etc/cdi/shortcut.json"
#define HOST_RUNDIR "/run/shortcut"
/* inside the container */
#define CTR_PREFIX "/opt/shortcut"
#define CTR_RUNDIR "/run/shortcut"

static int usage(FILE *f, int status)
{
	fputs("usage: shortcut cdi [--lib PATH] [--bin PATH] [--rundir DIR] [--name NAME]\n"
	      "                    [--output FILE] [--install]\n"
	      "  prints a Container Device Interface spec (CDI " CDI_VERSION ") of kind\n"
	      "  " CDI_KIND ": its device gives a container the library (preloaded), the\n"
	      "  shortcut binary and the host's run directory, shared:\n"
	      "      podman run --device " CDI_KIND "=default IMAGE ...\n"
	      "  --lib PATH     the library on the host (default: the one shortcut run preloads)\n"
	      "  --bin PATH     the shortcut binary on the host (default: this one)\n"
	      "  --rundir DIR   the host's run directory to share (default " HOST_RUNDIR ")\n"
	      "  --name NAME    the device's name (default: default)\n"
	      "  --output FILE  write the spec to FILE instead of standard output\n"
	      "  --install      create the run directory (mode 0700) and write the spec to\n"
	      "                 " CDI_DEFAULT_SPEC " (or --output's FILE)\n", f);
	return status;
}

/* CDI's device names: letters, digits, '_', '-', '.', ':', first a letter or digit */
static bool name_ok(const char *s)
{
	if (!*s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		     (*s >= '0' && *s <= '9')))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr("_-.:", *s)))
			return false;
	return true;
}

/* dir/rel with "." and ".." resolved by name (nothing of it exists here);
 * false if it leaves CTR_PREFIX */
static bool ctr_path(const char *dir, const char *rel, char *out, size_t len)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s/%s", dir, rel) >= (int)sizeof(tmp) || len < 2)
		return false;
	size_t n = 0;
	out[0] = 0;
	for (char *save, *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			char *slash = strrchr(out, '/');
			n = slash ? (size_t)(slash - out) : 0;
			out[n] = 0;
			continue;
		}
		int w = snprintf(out + n, len - n, "/%s", c);
		if (w < 0 || (size_t)w >= len - n)
			return false;
		n += (size_t)w;
	}
	return !strncmp(out, CTR_PREFIX "/", strlen(CTR_PREFIX) + 1);
}

/* s as a JSON string: '"', '\\' and control characters escaped; other
 * bytes as they are (a path in UTF-8 stays that path) */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void mount_json(FILE *f, const char *host, const char *ctr, const char *opts, bool last)
{
	fputs("          {\n            \"hostPath\": ", f);
	json_str(f, host);
	fputs(",\n            \"containerPath\": ", f);
	json_str(f, ctr);
	fprintf(f, ",\n            \"type\": \"bind\",\n            \"options\": [%s]\n"
		"          }%s\n", opts, last ? "" : ",");
}

static void spec(FILE *f, const char *name, const char *lib, const char *ctr_lib,
		 const char *bin, const char *rundir)
{
	char env[PATH_MAX + 32];
	fputs("{\n  \"cdiVersion\": \"" CDI_VERSION "\",\n  \"kind\": \"" CDI_KIND "\",\n"
	      "  \"devices\": [\n    {\n      \"name\": ", f);
	json_str(f, name);
	fputs(",\n      \"containerEdits\": {\n        \"env\": [\n          ", f);
	snprintf(env, sizeof(env), "LD_PRELOAD=%s", ctr_lib);
	json_str(f, env);
	fputs(",\n          \"SHORTCUT_RUNDIR=" CTR_RUNDIR "\"\n        ],\n"
	      "        \"mounts\": [\n", f);
	mount_json(f, lib, ctr_lib, "\"ro\", \"rbind\", \"nosuid\", \"nodev\"", false);
	mount_json(f, bin, CTR_PREFIX "/bin/shortcut", "\"ro\", \"rbind\", \"nosuid\", \"nodev\"",
		   false);
	mount_json(f, rundir, CTR_RUNDIR, "\"rw\", \"rbind\", \"nosuid\", \"nodev\", \"noexec\"",
		   true);
	fputs("        ]\n      }\n    }\n  ]\n}\n", f);
}

/* mkdir -p, the last one with mode */
static int make_dir(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	struct stat st;
	if (stat(p, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* the spec into path, whole or not at all (written beside it, renamed) */
static int write_spec(const char *path, const char *name, const char *lib, const char *ctr_lib,
		      const char *bin, const char *rundir)
{
	char dir[PATH_MAX], tmp[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		int rc = make_dir(dir, 0755);
		if (rc)
			return rc;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return -e;
	}
	spec(f, name, lib, ctr_lib, bin, rundir);
	int rc = fflush(f) || fsync(fd) < 0 ? -errno : 0;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int sc__cdi_main(int argc, char **argv)
{
	const char *lib = NULL, *bin = NULL, *rundir = HOST_RUNDIR, *name = "default";
	const char *out = NULL;
	bool install = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char **val = !strcmp(a, "--lib") ? &lib : !strcmp(a, "--bin") ? &bin :
				   !strcmp(a, "--rundir") ? &rundir : !strcmp(a, "--name") ? &name :
				   !strcmp(a, "--output") ? &out : NULL;
		if (val && i + 1 < argc) {
			*val = argv[++i];
		} else if (!strcmp(a, "--install")) {
			install = true;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			return usage(stdout, 0);
		} else {
			fprintf(stderr, "shortcut cdi: %s '%s'\n", val ? "no value after" :
				"unknown argument", a);
			return usage(stderr, 2);
		}
	}
	char libbuf[PATH_MAX], binbuf[PATH_MAX];
	if (!lib) {
		if (sc__find_lib(libbuf, sizeof(libbuf))) {
			fprintf(stderr, "shortcut cdi: %s not found beside the shortcut binary nor in "
				"%s from it: give --lib\n", SC_SONAME, SC_LIBDIR_REL);
			return 1;
		}
		lib = libbuf;
	}
	if (!bin) {
		ssize_t n = readlink("/proc/self/exe", binbuf, sizeof(binbuf) - 1);
		if (n < 0) {
			fprintf(stderr, "shortcut cdi: /proc/self/exe: %s: give --bin\n",
				strerror(errno));
			return 1;
		}
		binbuf[n] = 0;
		bin = binbuf;
	}
	const char *paths[] = { lib, bin, rundir, out ? out : "/" };
	for (unsigned k = 0; k < 4; k++)
		if (paths[k][0] != '/') {
			fprintf(stderr, "shortcut cdi: '%s': an absolute path, please\n", paths[k]);
			return 2;
		}
	if (!name_ok(name)) {
		fprintf(stderr, "shortcut cdi: --name '%s': letters, digits, '_', '-', '.' and "
			"':', first a letter or a digit\n", name);
		return 2;
	}
	/* the library where `shortcut run` inside looks for it from
	 * /opt/shortcut/bin (as installed); else /opt/shortcut/lib, where
	 * LD_PRELOAD finds it all the same */
	char ctr_lib[PATH_MAX], ctr_dir[PATH_MAX];
	if (!ctr_path(CTR_PREFIX "/bin", SC_LIBDIR_REL, ctr_dir, sizeof(ctr_dir)))
		snprintf(ctr_dir, sizeof(ctr_dir), "%s", CTR_PREFIX "/lib");
	snprintf(ctr_lib, sizeof(ctr_lib), "%s/%s", ctr_dir, SC_SONAME);

	if (install) {
		/* here and now: what the spec names must be there */
		if (access(lib, R_OK) < 0 || access(bin, X_OK) < 0) {
			fprintf(stderr, "shortcut cdi: %s: %s\n", access(lib, R_OK) < 0 ? lib : bin,
				strerror(errno));
			return 1;
		}
		int rc = make_dir(rundir, 0700);
		if (rc) {
			fprintf(stderr, "shortcut cdi: cannot create %s: %s\n", rundir,
				strerror(-rc));
			return 1;
		}
		if (!out)
			out = CDI_DEFAULT_SPEC;
	}
	if (!out) {
		spec(stdout, name, lib, ctr_lib, bin, rundir);
		return fflush(stdout) ? 1 : 0;
	}
	int rc = write_spec(out, name, lib, ctr_lib, bin, rundir);
	if (rc) {
		fprintf(stderr, "shortcut cdi: cannot write %s: %s\n", out, strerror(-rc));
		return 1;
	}
	if (install)
		printf("%s written (device %s=%s), run directory %s\n", out, CDI_KIND, name, rundir);
	return 0;
}
