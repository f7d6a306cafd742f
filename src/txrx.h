/* SPDX-License-Identifier: MIT */
/* Shared between the send path (tx.c), the receive path (rx.c) and conn.c. */
#ifndef SC_TXRX_H
#define SC_TXRX_H

#include <stdbool.h>
#include <stdint.h>

struct sc_conn;

/* The peer's SC_SF_* flags, validated (garbage counts as an abort). */
uint32_t sc__peer_flags(struct sc_conn *c);
/* Block until cond holds: spin, arm, sleep.  0 or -errno. */
int sc__conn_wait(struct sc_conn *c, bool tx, bool (*cond)(struct sc_conn *));
/* Nonblocking: request an edge wake-up; true if cond holds after all. */
bool sc__conn_arm_edge(struct sc_conn *c, bool tx, bool (*cond)(struct sc_conn *));
/* The peer reset c: record it (sticky, counted once); -ECONNRESET. */
int sc__conn_reset(struct sc_conn *c);
/* Make sure c has a channel to be woken on (its own by default). */
int sc__conn_channel(struct sc_conn *c);

#endif
