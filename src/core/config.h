/* SPDX-License-Identifier: MIT */
#ifndef SC_CONFIG_H
#define SC_CONFIG_H

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
};

extern struct sc_config sc__cfg;

/* 0, or -EINVAL after printing which variable is wrong and what it allows. */
int sc__config_load(void);

#endif
