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

#define DEFAULT_RING   (1u << 20)
#define DEFAULT_SPIN_US 50u

struct sc_config sc__cfg = {
	.rmem = DEFAULT_RING,
	.wmem = DEFAULT_RING,
	.spin_ns = DEFAULT_SPIN_US * 1000,
	.max_conns = SC_MAX_SLOTS,
	.claim_ms = 10000,
	.short_tcp = 1,
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

static int get_ring(const char *name, uint32_t *dst)
{
	const char *v = getenv(name);
	uint64_t n;

	if (!v)
		return 0;
	if (parse_size(v, &n) || n < SC_RING_MIN || n > SC_RING_MAX)
		return bad(name, v, "ring size in bytes from 16K to 8M "
			   "(suffix K or M allowed; rounded up to a power of two)");
	*dst = pow2_up((uint32_t)n);
	return 0;
}

static int get_uint(const char *name, uint64_t lo, uint64_t hi, const char *allowed,
		    uint64_t *dst)
{
	const char *v = getenv(name);
	uint64_t n;

	if (!v)
		return 1;
	if (parse_size(v, &n) || n < lo || n > hi || strpbrk(v, "kKmMgG"))
		return bad(name, v, allowed);
	*dst = n;
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

/* SHORTCUT_GROUP: a group name, or a number, that this process is in. */
static int get_group(void)
{
	const char *v = getenv("SHORTCUT_GROUP");
	if (!v)
		return 0;
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	gid_t gid;
	if (*v >= '0' && *v <= '9' && !*end && !errno && n < UINT32_MAX) {
		gid = (gid_t)n;
	} else {
		struct group *gr = *v ? getgrnam(v) : NULL;
		if (!gr)
			return bad("SHORTCUT_GROUP", v, "no such group; allowed: the name or number "
				   "of a group this user is in");
		gid = gr->gr_gid;
	}
	if (!in_group(gid))
		return bad("SHORTCUT_GROUP", v, "this user is not in that group; allowed: the name "
			   "or number of a group this user is in, whose members share the run "
			   "directory (the group's, mode 2770)");
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

static void load(void)
{
	uint64_t n;
	int rc;

	if ((load_rc = get_ring("SHORTCUT_RMEM", &sc__cfg.rmem)))
		return;
	if ((load_rc = get_ring("SHORTCUT_WMEM", &sc__cfg.wmem)))
		return;
	rc = get_uint("SHORTCUT_SPIN_US", 0, 1000000,
		      "microseconds to spin before sleeping, 0 (never) to 1000000", &n);
	if (rc < 0) {
		load_rc = rc;
		return;
	}
	if (rc == 0)
		sc__cfg.spin_ns = (uint32_t)(n * 1000);
	rc = get_uint("SHORTCUT_MAX_CONNS", 1, SC_MAX_SLOTS,
		      "connections per link group, 1 to 255", &n);
	if (rc < 0) {
		load_rc = rc;
		return;
	}
	if (rc == 0)
		sc__cfg.max_conns = (uint32_t)n;
	static const struct { const char *name; uint64_t lo, hi; const char *allowed;
			      uint32_t *dst; } more[] = {
		{ "SHORTCUT_DISABLE", 0, 1, "0 (accelerate) or 1 (leave every connection on TCP)",
		  &sc__cfg.disable },
		{ "SHORTCUT_LOG", 0, 3, "0 (quiet) to 3 (every decision), to stderr",
		  &sc__cfg.log },
		{ "SHORTCUT_CLAIM_MS", 1, 600000,
		  "milliseconds a client waits for its offer to be claimed, 1 to 600000",
		  &sc__cfg.claim_ms },
		{ "SHORTCUT_SHORT_TCP", 0, 2,
		  "1 (a client's short connections to a port go on TCP once learnt, "
		  "where shared memory loses: a crowded machine, no spinning, a server "
		  "forking per connection), 2 (always, once learnt) or 0 (accelerate "
		  "every connection)", &sc__cfg.short_tcp },
	};
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
		rc = get_uint(more[i].name, more[i].lo, more[i].hi, more[i].allowed, &n);
		if (rc < 0) {
			load_rc = rc;
			return;
		}
		if (rc == 0)
			*more[i].dst = (uint32_t)n;
	}
	const char *d = getenv("SHORTCUT_RUNDIR");
	if (d && (!*d || d[0] != '/' || strlen(d) >= 80)) {
		load_rc = bad("SHORTCUT_RUNDIR", d, "an absolute directory path shorter than 80 bytes");
		return;
	}
	load_rc = get_group();
}

int sc__config_load(void)
{
	int saved = errno;

	pthread_once(&once, load);
	errno = saved;
	return load_rc;
}
