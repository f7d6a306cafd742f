/* SPDX-License-Identifier: MIT */
#ifndef SC_CONFIG_H
#define SC_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

/* Validated SHORTCUT_* settings; read once, on first use. */
struct sc_config {
	uint32_t rmem;          /* receive ring bytes (power of two) */
	uint32_t wmem;          /* send ring bytes (power of two) */
	uint32_t spin_ns;       /* spin budget before sleeping; 0 = never spin */
	uint32_t max_conns;     /* connections per link group */
	/* the interposer */
	uint32_t disable;       /* 1: every connection stays on TCP */
	uint32_t log;           /* 0..3 */
	uint32_t claim_ms;      /* a client's wait for its offer to be claimed */
	uint32_t short_tcp;     /* short connections learnt per port on TCP: 0 never,
				 * 1 where shared memory loses, 2 always */
	/* SHORTCUT_GROUP: users who trust each other share the run
	 * directory (owned by this group, mode 2770) and accelerate each
	 * other's connections; unset, only this user's processes do */
	uint32_t group_set;
	uint32_t group_gid;
};

extern struct sc_config sc__cfg;

/* 0, or -EINVAL after printing which variable is wrong and what it allows. */
int sc__config_load(void);
/* May the process whose credentials a Unix socket's peer has (sock, its
 * SO_PEERCRED in cr) share memory with us: our user, or with
 * SHORTCUT_GROUP a member of that group (its primary or supplementary
 * groups, SO_PEERGROUPS)? */
struct ucred;
bool sc__peer_trusted(int sock, const struct ucred *cr);

#endif
