/* SPDX-License-Identifier: MIT */
/*
 * shortcut perf (perf.c): what the measuring bodies and the transports
 * (perf_xport.c) share — the configuration, the page shared with the
 * children, one end of a connection and its transport's ops.
 */
#ifndef SHORTCUT_PERF_H
#define SHORTCUT_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shortcut.h"

#define PERF_MAX_SIZE	(64u << 20)
#define MEMCPY_RING	(256u << 10)	/* a typical ring: what memcpy cycles through */
#define SHM_EOF		UINT64_MAX
#define MAX_REPS	1000
#define MAX_SECONDS	3600.0

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax()	__builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax()	__asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax()	__asm__ volatile("" ::: "memory")
#endif

enum mode { PINGPONG, STREAM };
#define M_PP	(1u << PINGPONG)
#define M_ST	(1u << STREAM)

struct cfg {
	enum mode mode;
	size_t size;
	double seconds;		/* per repetition per transport */
	int reps;
	bool json;
};

/* Written by the measuring child (and the stream sender), read after reaping. */
struct run_result {
	uint64_t iters;		/* pingpong: timed round trips */
	uint64_t bytes;		/* stream: bytes the receiver got */
	uint64_t ns;		/* elapsed on the measuring side */
	uint64_t sent;		/* stream: bytes the sender sent, to cross-check */
};

/* 128 bytes apart: not even the adjacent-line prefetcher pairs the flags. */
struct shm_flag {
	_Alignas(128) uint64_t seq;
};

/* futex transport: a 32-bit word each way (the futex size) */
struct futex_word {
	_Alignas(128) uint32_t seq;
};

struct shared {
	struct shm_flag flag[2];	/* shm transport: flag[i] written by side i only */
	struct futex_word fw[2];	/* futex transport: fw[i] written by side i only */
	struct run_result res;
};

/* One end of a connection, whatever the transport. */
struct xport {
	const struct xport_ops *ops;
	const char *role;		/* for messages: client, server, sender, receiver */
	char path[80];			/* unix / shortcut rendezvous ('@': abstract) */
	uint16_t port;			/* tcp rendezvous on 127.0.0.1, set by listen */
	bool nodelay;			/* tcp: TCP_NODELAY on both ends */
	int lfd, fd;
	struct sc_listener *l;
	struct sc_conn *c;
	struct shared *sh;
	int side;			/* shm: 0 accepting, 1 connecting */
	uint64_t tx_seq, rx_seq;	/* shm */
};

/*
 * listen runs in the accepting child before the connecting child is let go;
 * send/recv return a count or -errno (recv: 0 at end of stream; all: wait
 * for len bytes); shutdown ends our sending, the peer then sees end of stream.
 */
struct xport_ops {
	const char *name;
	const char *prefix;		/* rendezvous name prefix, if any */
	bool bare;			/* moves no payload (shm): nothing to verify */
	int (*listen)(struct xport *x);
	int (*accept)(struct xport *x);
	int (*connect)(struct xport *x);
	ssize_t (*send)(struct xport *x, const void *buf, size_t len);
	ssize_t (*recv)(struct xport *x, void *buf, size_t len, bool all);
	int (*shutdown)(struct xport *x);
	int (*close)(struct xport *x);
};

/* The transports (perf_xport.c). */
extern const struct xport_ops sc__perf_tcp_ops, sc__perf_unix_ops, sc__perf_sc_ops,
	sc__perf_shm_ops, sc__perf_futex_ops;

/* "shortcut perf: " and the message on stderr (perf.c) */
void sc__perf_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same for a transport's failed step; returns err (-errno). */
int sc__perf_xerr(const struct xport *x, const char *what, int err);

#endif
