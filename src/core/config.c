/* SPDX-License-Identifier: MIT */
/*
 * SHORTCUT_* environment variables: parsed and validated once; a bad value
 * is reported by name with its allowed range and makes every entry point
 * fail with -EINVAL rather than run on a guess.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "layout.h"
#include "sys.h"

#define SC_DEFAULT_RING(f, d) .f = (d),
#define SC_DEFAULT_MICROS(f, d) .f = (d) * 1000u,
#define SC_DEFAULT_UINT(f, d) .f = (d),
#define SC_DEFAULT_PATH(f, d)
#define SC_DEFAULT_GROUP(f, d)
struct sc_config sc__cfg = {
#define SC_SETTING(name, field, kind, lo, hi, dflt, allowed) SC_DEFAULT_##kind(field, dflt)
#include "settings.def"
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc;

/* Parse an unsigned decimal with an optional K/M/G suffix (binary units). */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	uint64_t v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	int shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (v > (UINT64_MAX >> shift))
		return -1;      /* would wrap into the allowed range */
	v <<= shift;
	if (*end)
		return -1;
	*out = v;
	return 0;
}

static uint32_t pow2_up(uint32_t v)
{
	uint32_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

static int bad(const char *name, const char *val, const char *allowed)
{
	fprintf(stderr, "shortcut: invalid %s=\"%s\": %s\n", name, val, allowed);
	return -EINVAL;
}

/*
 * One getter per kind of settings.def: 0 (unset: the default stays, or
 * valid: stored in *dst), or -EINVAL after naming the variable.
 */
static int get_RING(const char *name, uint64_t lo, uint64_t hi, const char *allowed,
		    uint32_t *dst)
{
	const char *v = getenv(name);
	uint64_t n;

	if (!v)
		return 0;
	if (parse_size(v, &n) || n < lo || n > hi)
		return bad(name, v, allowed);
	*dst = pow2_up((uint32_t)n);
	return 0;
}

static int get_UINT(const char *name, uint64_t lo, uint64_t hi, const char *allowed,
		    uint32_t *dst)
{
	const char *v = getenv(name);
	uint64_t n;

	if (!v)
		return 0;
	if (parse_size(v, &n) || n < lo || n > hi || strpbrk(v, "kKmMgG"))
		return bad(name, v, allowed);
	*dst = (uint32_t)n;
	return 0;
}

/* microseconds, kept in nanoseconds */
static int get_MICROS(const char *name, uint64_t lo, uint64_t hi, const char *allowed,
		      uint32_t *dst)
{
	uint32_t us = UINT32_MAX;
	int rc = get_UINT(name, lo, hi, allowed, &us);
	if (!rc && us != UINT32_MAX)
		*dst = us * 1000u;
	return rc;
}

/* (paths.c reads it: checked here only) */
static int get_PATH(const char *name, uint64_t lo, uint64_t hi, const char *allowed, void *dst)
{
	const char *d = getenv(name);
	size_t len = d ? strlen(d) : 0;
	if (d && (d[0] != '/' || len < lo || len > hi))
		return bad(name, d, allowed);
	return 0;
}

/* Is gid one of this process's groups? */
static bool in_group(gid_t gid)
{
	gid_t g[256];
	if (getegid() == gid)
		return true;
	int n = getgroups(256, g);
	for (int i = 0; i < n; i++)
		if (g[i] == gid)
			return true;
	return false;
}

/* SHORTCUT_GROUP: a group name, or a number, that this process is in
 * (the error says which of the two is wrong, not `allowed`). */
static int get_GROUP(const char *name, uint64_t lo, uint64_t hi, const char *allowed, void *dst)
{
	const char *v = getenv(name);
	if (!v)
		return 0;
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	gid_t gid;
	if (*v >= '0' && *v <= '9' && !*end && !errno && n <= hi) {
		gid = (gid_t)n;
	} else {
		struct group *gr = *v ? getgrnam(v) : NULL;
		if (!gr)
			return bad(name, v, "no such group; allowed: the name or number of a group "
				   "this user is in");
		gid = gr->gr_gid;
	}
	if (!in_group(gid))
		return bad(name, v, "this user is not in that group; allowed: the name or number "
			   "of a group this user is in, whose members share the run directory (the "
			   "group's, mode 2770)");
	sc__cfg.group_set = 1;
	sc__cfg.group_gid = (uint32_t)gid;
	return 0;
}

bool sc__peer_trusted(int sock, const struct ucred *cr)
{
	if (cr->uid == geteuid())
		return true;
	if (!sc__cfg.group_set)
		return false;
	if (cr->gid == sc__cfg.group_gid)
		return true;
	gid_t g[256];
	socklen_t l = sizeof(g);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, g, &l) < 0)
		return false;
	for (size_t i = 0; i < l / sizeof(g[0]); i++)
		if (g[i] == sc__cfg.group_gid)
			return true;
	return false;
}

#define SC_DST_RING(f) &sc__cfg.f
#define SC_DST_MICROS(f) &sc__cfg.f
#define SC_DST_UINT(f) &sc__cfg.f
#define SC_DST_PATH(f) NULL
#define SC_DST_GROUP(f) NULL
static void load(void)
{
#define SC_SETTING(name, field, kind, lo, hi, dflt, allowed) \
	if ((load_rc = get_##kind(#name, lo, hi, allowed, SC_DST_##kind(field)))) \
		return;
#include "settings.def"
}

int sc__config_load(void)
{
	int saved = errno;

	pthread_once(&once, load);
	errno = saved;
	return load_rc;
}
