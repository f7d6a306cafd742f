/* SPDX-License-Identifier: MIT */
/*
 * Device memory (the kernel's devmem TCP, on shared memory).
 *
 * A process binds a region (a dma-buf in the kernel: here a memfd or any
 * mappable file, behind a memory provider) for receiving, for sending, or
 * both.  A connection whose receiver reads with devmem has its payload
 * written by the sender straight into the receiver's region (the NIC's DMA
 * in the kernel; one copy in all), and its ring carries records naming the
 * chunks (layout.h: struct sc_dm_rec).  The receiving program gets
 * fragments (offset, size, token) instead of bytes, reads them in its own
 * mapping of the region, and returns the tokens; a chunk is reused once its
 * token came back.  A region full of unreturned fragments makes senders
 * wait, never lose or overwrite a byte.
 *
 * Who does what:
 *   the receiver   binds (sc__dm_bind), sets the ring's dm_want, shares
 *                  the region and its chunk table with the sending process
 *                  (SC_MSG_DEVMEM, two fds), reads records (sc__dm_recv),
 *                  frees chunks when tokens come back (sc__dm_release);
 *   the sender     maps what it was sent (sc__dm_peer_add), frames its
 *                  ring once it has the mapping, takes chunks, copies in.
 */
#ifndef SC_DEVMEM_H
#define SC_DEVMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "layout.h"

/*
 * A memory provider: how a region is mapped, written and made visible.
 * The host-memory one (memfd, or any file mmap can share) is the only one
 * built; a GPU provider would map the GPU memory and copy with the GPU's
 * engine.
 */
struct sc_dm_provider {
	const char *name;
	/* map fd (its whole size, returned in *size) for reading and writing */
	int (*map)(int fd, size_t *size, void **base);
	void (*unmap)(void *base, size_t size);
	/* copy len bytes from host memory into the region at off */
	void (*copy_in)(void *base, size_t off, const void *src, size_t len);
	/* the bytes copied in are visible to the region's readers */
	void (*sync)(void *base, size_t off, size_t len);
};
extern const struct sc_dm_provider sc__dm_host;

/* Binding flags */
#define SC_DM_RX 1
#define SC_DM_TX 2

/* Bind fd's memory (a dup of fd is kept): returns the binding id (> 0) or
 * -errno (EBADF: not an fd; EINVAL: empty or not mappable; ENOMEM). */
int sc__dm_bind(int fd, int flags);
/* Unbind: no new connection uses it; the region stays mapped while
 * fragments or connections use it.  -ENOENT if unknown. */
int sc__dm_unbind(uint32_t id);
/* A binding's region for sending from (SC_DM_TX): base and size, or
 * -ENOENT (unknown, or not a tx binding). */
int sc__dm_tx_region(uint32_t id, const uint8_t **base, size_t *size);
/* Every binding gone (a fork child: the parent's are not its own). */
void sc__dm_atfork_child(void);

/* Per-socket receive state: the binding, and the tokens the program holds
 * (the kernel keeps them per socket).  It outlives the connection (a
 * switch back to TCP): tokens stay valid until returned or freed. */
struct sc_dm_rx;
/* The process's first rx binding, for a socket starting to receive with
 * devmem: -ENOENT if there is none (the kernel: nothing steered to a
 * bound queue). */
int sc__dm_rx_new(struct sc_dm_rx **out);
void sc__dm_rx_free(struct sc_dm_rx *rx);        /* returns every token */
uint32_t sc__dm_rx_id(const struct sc_dm_rx *rx);
uint32_t sc__dm_rx_outstanding(const struct sc_dm_rx *rx);

/* One fragment for the program (the kernel's struct dmabuf_cmsg) */
struct sc_dm_frag {
	uint64_t offset;
	uint32_t size, token, id;
};

/* Tokens back: the number of fragments freed, at most max_frags tokens
 * looked at (an unknown one counts too, as in the kernel). */
struct sc_dm_token {
	uint32_t start, count;
};
int sc__dm_release(struct sc_dm_rx *rx, const struct sc_dm_token *t, int n, int max_frags);

/* Counters of the process (shortcut stats). */
struct sc_dm_stats {
	uint32_t bindings;
	uint64_t bytes_into_regions;    /* payload senders of ours copied into regions */
	uint64_t frags_delivered, frags_outstanding;
	uint64_t waits;                 /* sends that waited for a free chunk */
};
void sc__dm_stats(struct sc_dm_stats *st);

#endif
