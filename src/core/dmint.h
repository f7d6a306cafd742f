/* SPDX-License-Identifier: MIT */
/* What devmem.c, dmpath.c and the link groups share (devmem.h is the API). */
#ifndef SC_DMINT_H
#define SC_DMINT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "devmem.h"
#include "layout.h"

struct sc_conn;

/* A binding of ours (dm_lock for the list and refs). */
struct sc_dm_binding {
	uint32_t id;
	int flags;                      /* SC_DM_RX, SC_DM_TX */
	int fd;                         /* our dup of the program's fd */
	uint8_t *base;
	size_t size;
	const struct sc_dm_provider *prov;
	/* rx: the chunk table, shared with senders */
	int ctl_fd;
	struct sc_dm_hdr *hdr;
	_Atomic uint64_t *owner;
	size_t ctl_size;
	uint32_t nchunks, chunk;
	uint8_t *delivered;             /* chunk given to the program, token out */
	int refs;                       /* the binding itself, rx states */
	bool unbound;
	struct sc_dm_binding *next;
};

/* A socket's receive state (devmem.h). */
struct sc_dm_rx {
	pthread_mutex_t lock;           /* tokens */
	struct sc_dm_binding *b;
	uint32_t *tok;                  /* token -> chunk + 1, 0: free */
	uint32_t *freel;                /* free tokens */
	uint32_t cap, nfree, nout;
};

/* A peer's region, mapped by a sender of ours (one list per link group). */
struct sc_dm_peer {
	uint32_t id;
	uint8_t *base;
	size_t size;
	struct sc_dm_hdr *hdr;
	_Atomic uint64_t *owner;
	size_t ctl_size;
	uint32_t nchunks, chunk;        /* validated when mapped */
	const struct sc_dm_provider *prov;
	struct sc_dm_peer *next;
};

int sc__dm_token_new(struct sc_dm_rx *rx, uint32_t chunk);
void sc__dm_reclaim(struct sc_dm_rx *rx, uint64_t key);
void sc__dm_count_bytes(uint64_t n);
void sc__dm_count_wait(void);
int sc__dm_share_fds(uint32_t id, int *region_fd, int *ctl_fd);

int sc__dm_peer_add(struct sc_dm_peer **list, uint32_t id, int region_fd, int ctl_fd);
struct sc_dm_peer *sc__dm_peer_find(struct sc_dm_peer *const *list, uint32_t id);
void sc__dm_peers_free(struct sc_dm_peer *list);
int sc__dm_take_chunk(struct sc_dm_peer *p, uint64_t key);
void sc__dm_untake_chunk(struct sc_dm_peer *p, int chunk);
bool sc__dm_any_free(struct sc_dm_peer *p);
void sc__dm_wait_chunk(struct sc_dm_peer *p, uint32_t seq, int ms);

/* dmpath.c */
/* The key a connection's chunks are owned under (both sides agree). */
uint64_t sc__dm_key(struct sc_conn *c);

#endif
