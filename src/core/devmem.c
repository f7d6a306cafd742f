/* SPDX-License-Identifier: MIT */
/*
 * Device memory: bindings, the host-memory provider, chunk tables, tokens
 * (devmem.h).  The framed send and receive paths are in dmpath.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compat.h"
#include "devmem.h"
#include "dmint.h"
#include "rawsys.h"
#include "stats.h"
#include "sys.h"
#include "forkreset.h"

/* ---- the host-memory provider -------------------------------------------- */

static int host_map(int fd, size_t *size, void **base)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -EBADF;
	if (st.st_size <= 0 || (uint64_t)st.st_size > (1ull << 40))
		return -EINVAL;
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -EINVAL;         /* not something mmap can share */
	*size = (size_t)st.st_size;
	*base = p;
	return 0;
}

static void host_unmap(void *base, size_t size)
{
	munmap(base, size);
}

static void host_copy_in(void *base, size_t off, const void *src, size_t len)
{
	memcpy((uint8_t *)base + off, src, len);
}

static void host_sync(void *base, size_t off, size_t len)
{
	/* the same memory for every process that maps it: the ring's
	 * release store that follows orders the copy before the record */
	(void)base;
	(void)off;
	(void)len;
}

const struct sc_dm_provider sc__dm_host = {
	.name = "host", .map = host_map, .unmap = host_unmap, .copy_in = host_copy_in,
	.sync = host_sync,
};

/* ---- bindings ------------------------------------------------------------- */

static pthread_mutex_t dm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sc_dm_binding *bindings;
static uint32_t next_id = 1;
void sc__dm_count_bytes(uint64_t n)
{
	SC_STAT_ADD(dm_bytes_in, n);
}

void sc__dm_count_wait(void)
{
	SC_STAT_ADD(dm_waits, 1);
}

/* dm_lock held */
static void binding_put_locked(struct sc_dm_binding *b)
{
	if (--b->refs)
		return;
	for (struct sc_dm_binding **pp = &bindings; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	b->prov->unmap(b->base, b->size);
	if (b->hdr)
		munmap(b->hdr, b->ctl_size);
	if (b->ctl_fd >= 0)
		close(b->ctl_fd);
	close(b->fd);
	free(b->delivered);
	free(b);
}

static int ctl_make(struct sc_dm_binding *b)
{
	b->chunk = b->size >= SC_DM_BIG_REGION ? SC_DM_CHUNK_MAX : SC_DM_CHUNK_MIN;
	b->nchunks = (uint32_t)(b->size / b->chunk);
	if (!b->nchunks)
		return -EINVAL;
	b->ctl_size = sizeof(struct sc_dm_hdr) + (size_t)b->nchunks * sizeof(uint64_t);
	int fd = sc__fd_park((int)SC_SYSCALL(SYS_memfd_create, "shortcut-devmem",
					     MFD_CLOEXEC | MFD_ALLOW_SEALING, 0, 0, 0, 0));
	if (fd < 0)
		return -ENOMEM;
	void *p = MAP_FAILED;
	/* sealed: the peer we share it with must not fault on it (below) */
	if (ftruncate(fd, (off_t)b->ctl_size) == 0 &&
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
		p = mmap(NULL, b->ctl_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -ENOMEM;
	}
	b->ctl_fd = fd;
	b->hdr = p;
	b->owner = (_Atomic uint64_t *)(b->hdr + 1);
	b->hdr->magic = SC_DM_MAGIC;
	b->hdr->version = SC_LAYOUT_VERSION;
	b->hdr->id = b->id;
	b->hdr->nchunks = b->nchunks;
	b->hdr->chunk = b->chunk;
	b->hdr->region_size = b->size;
	b->delivered = calloc(b->nchunks, 1);
	return b->delivered ? 0 : -ENOMEM;
}

int sc__dm_bind(int fd, int flags)
{
	if (fd < 0)
		return -EBADF;
	int saved = errno;
	int dfd = sc__fd_dup(fd);
	if (dfd < 0) {
		errno = saved;
		return -EBADF;
	}
	struct sc_dm_binding *b = calloc(1, sizeof(*b));
	int rc = b ? 0 : -ENOMEM;
	if (b) {
		b->fd = dfd;
		b->ctl_fd = -1;
		b->flags = flags;
		b->prov = &sc__dm_host;
		b->refs = 1;
		void *base = NULL;
		rc = b->prov->map(dfd, &b->size, &base);
		b->base = base;
	}
	if (rc) {
		free(b);
		close(dfd);
		errno = saved;
		return rc;
	}
	pthread_mutex_lock(&dm_lock);
	b->id = next_id++;
	if ((flags & SC_DM_RX) && (rc = ctl_make(b)) < 0) {
		binding_put_locked(b);  /* (not listed yet: frees it) */
		pthread_mutex_unlock(&dm_lock);
		errno = saved;
		return rc;
	}
	b->next = bindings;
	bindings = b;
	pthread_mutex_unlock(&dm_lock);
	SC_STAT_ADD(dm_bindings, 1);
	errno = saved;
	return (int)b->id;
}

int sc__dm_unbind(uint32_t id)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&dm_lock);
	for (struct sc_dm_binding *b = bindings; b; b = b->next)
		if (b->id == id && !b->unbound) {
			b->unbound = true;
			atomic_fetch_sub_explicit(&sc__statp->dm_bindings, 1, memory_order_relaxed);
			binding_put_locked(b);
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&dm_lock);
	return rc;
}

int sc__dm_tx_region(uint32_t id, const uint8_t **base, size_t *size)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&dm_lock);
	for (struct sc_dm_binding *b = bindings; b; b = b->next)
		if (b->id == id && !b->unbound && (b->flags & SC_DM_TX)) {
			*base = b->base;
			*size = b->size;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&dm_lock);
	return rc;
}

void sc__dm_atfork_child(void)
{
	/* the parent's: their fds are ours too (closed with the process);
	 * nothing of them may be freed here while the parent uses them */
	sc__mutex_reset(&dm_lock);
	SC_RESET(bindings, NULL);
}

/* ---- receiving: tokens ------------------------------------------------------ */

int sc__dm_rx_new(struct sc_dm_rx **out)
{
	struct sc_dm_rx *rx = calloc(1, sizeof(*rx));
	if (!rx)
		return -ENOMEM;
	pthread_mutex_init(&rx->lock, NULL);
	pthread_mutex_lock(&dm_lock);
	/* the first rx binding made (loopback has one queue) */
	struct sc_dm_binding *found = NULL;
	for (struct sc_dm_binding *b = bindings; b; b = b->next)
		if ((b->flags & SC_DM_RX) && !b->unbound && (!found || b->id < found->id))
			found = b;
	if (found)
		found->refs++;
	pthread_mutex_unlock(&dm_lock);
	if (!found) {
		free(rx);
		return -ENOENT;
	}
	rx->b = found;
	*out = rx;
	return 0;
}

uint32_t sc__dm_rx_id(const struct sc_dm_rx *rx)
{
	return rx->b->id;
}

uint32_t sc__dm_rx_outstanding(const struct sc_dm_rx *rx)
{
	return rx->nout;
}

/* A chunk's one fragment came back (rx->lock held): free it for senders. */
static void chunk_free(struct sc_dm_binding *b, uint32_t chunk)
{
	uint64_t key = atomic_load_explicit(&b->owner[chunk], memory_order_relaxed);
	b->delivered[chunk] = 0;
	atomic_store_explicit(&b->owner[chunk], 0, memory_order_release);
	(void)key;
	/* seq_cst, both: our bump before our load of waiters; a waiting
	 * sender's waiters bump before its load of free_seq
	 * (sc__dm_wait_chunk): Dekker's pattern.  (They were release and
	 * acquire, which let the load pass the bump off x86: a sender could
	 * sleep its whole timeout with a chunk free.) */
	atomic_fetch_add_explicit(&b->hdr->free_seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&b->hdr->waiters, memory_order_seq_cst))
		SC_SYSCALL(SYS_futex, &b->hdr->free_seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

int sc__dm_token_new(struct sc_dm_rx *rx, uint32_t chunk)
{
	if (rx->nfree == 0) {
		uint32_t cap = rx->cap ? rx->cap * 2 : 64;
		uint32_t *t = realloc(rx->tok, cap * sizeof(*t));
		uint32_t *f = t ? realloc(rx->freel, cap * sizeof(*f)) : NULL;
		if (!t || !f) {
			if (t)
				rx->tok = t;
			return -ENOMEM;
		}
		rx->tok = t;
		rx->freel = f;
		for (uint32_t i = cap; i > rx->cap; i--) {
			rx->tok[i - 1] = 0;
			rx->freel[rx->nfree++] = i - 1;
		}
		rx->cap = cap;
	}
	uint32_t tok = rx->freel[--rx->nfree];
	rx->tok[tok] = chunk + 1;
	rx->nout++;
	SC_STAT_ADD(dm_frags, 1);
	SC_STAT_ADD(dm_frags_out, 1);
	return (int)tok;
}

static bool token_put(struct sc_dm_rx *rx, uint32_t tok)
{
	if (tok >= rx->cap || !rx->tok[tok])
		return false;
	uint32_t chunk = rx->tok[tok] - 1;
	rx->tok[tok] = 0;
	rx->freel[rx->nfree++] = tok;
	rx->nout--;
	atomic_fetch_sub_explicit(&sc__statp->dm_frags_out, 1, memory_order_relaxed);
	chunk_free(rx->b, chunk);
	return true;
}

int sc__dm_release(struct sc_dm_rx *rx, const struct sc_dm_token *t, int n, int max_frags)
{
	int freed = 0, looked = 0;
	pthread_mutex_lock(&rx->lock);
	/* every token looked at counts, freed or not, as the kernel's
	 * MAX_DONTNEED_FRAGS does: a count is the program's to choose, and
	 * 2^32 - 1 of them was four billion look-ups (fuzz_devmem) */
	for (int i = 0; i < n && looked < max_frags; i++)
		for (uint64_t k = 0; k < t[i].count && looked < max_frags; k++, looked++)
			if (token_put(rx, t[i].start + (uint32_t)k))
				freed++;
	pthread_mutex_unlock(&rx->lock);
	return freed;
}

void sc__dm_rx_free(struct sc_dm_rx *rx)
{
	if (!rx)
		return;
	pthread_mutex_lock(&rx->lock);
	for (uint32_t t = 0; t < rx->cap; t++)
		if (rx->tok[t])
			token_put(rx, t);
	pthread_mutex_unlock(&rx->lock);
	pthread_mutex_lock(&dm_lock);
	binding_put_locked(rx->b);
	pthread_mutex_unlock(&dm_lock);
	pthread_mutex_destroy(&rx->lock);
	free(rx->tok);
	free(rx->freel);
	free(rx);
}

/* Chunks a connection's sender took but never framed into the ring (it
 * died or switched mid-send), or framed but never delivered: freed when
 * the receiver's side of the connection ends.  rx->lock held. */
void sc__dm_reclaim(struct sc_dm_rx *rx, uint64_t key)
{
	struct sc_dm_binding *b = rx->b;
	for (uint32_t i = 0; i < b->nchunks; i++)
		if (atomic_load_explicit(&b->owner[i], memory_order_relaxed) == key &&
		    !b->delivered[i])
			chunk_free(b, i);
}

/* ---- sending: the peer's regions --------------------------------------------- */

/* fd cannot shrink under our mapping: a peer of the same user that shrank
 * the region or the chunk table it shared would make our stores fault
 * (SIGBUS), as the kernel's udmabuf requires F_SEAL_SHRINK of a memfd. */
static bool cannot_shrink(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);
	return seals >= 0 && (seals & F_SEAL_SHRINK);
}

int sc__dm_peer_add(struct sc_dm_peer **list, uint32_t id, int region_fd, int ctl_fd)
{
	/* not sealed: we send that peer plain bytes (its receives are then
	 * linear data, as the kernel's for a packet not in device memory) */
	if (!cannot_shrink(region_fd) || !cannot_shrink(ctl_fd))
		return -EINVAL;
	struct sc_dm_peer *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->prov = &sc__dm_host;
	void *base = NULL;
	int rc = p->prov->map(region_fd, &p->size, &base);
	p->base = base;
	if (rc) {
		free(p);
		return rc;
	}
	struct stat st;
	void *h = MAP_FAILED;
	if (fstat(ctl_fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct sc_dm_hdr))
		h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, ctl_fd, 0);
	if (h == MAP_FAILED) {
		p->prov->unmap(p->base, p->size);
		free(p);
		return -EPROTO;
	}
	p->hdr = h;
	p->ctl_size = (size_t)st.st_size;
	/* validated once here (our private copies from now on) */
	uint32_t n = p->hdr->nchunks, ch = p->hdr->chunk;
	if (p->hdr->magic != SC_DM_MAGIC || p->hdr->version != SC_LAYOUT_VERSION ||
	    p->hdr->id != id || !n || ch < SC_DM_CHUNK_MIN || ch > SC_DM_CHUNK_MAX ||
	    (ch & (ch - 1)) || (uint64_t)n * ch > p->size ||
	    sizeof(struct sc_dm_hdr) + (uint64_t)n * 8 > p->ctl_size) {
		munmap(h, p->ctl_size);
		p->prov->unmap(p->base, p->size);
		free(p);
		return -EPROTO;
	}
	p->id = id;
	p->nchunks = n;
	p->chunk = ch;
	p->owner = (_Atomic uint64_t *)(p->hdr + 1);
	/* published last: senders read the list without the group lock */
	p->next = *list;
	atomic_store_explicit((struct sc_dm_peer *_Atomic *)list, p, memory_order_release);
	return 0;
}

struct sc_dm_peer *sc__dm_peer_find(struct sc_dm_peer *const *list, uint32_t id)
{
	for (struct sc_dm_peer *p = atomic_load_explicit((struct sc_dm_peer *_Atomic *)list,
							 memory_order_acquire); p; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

void sc__dm_peers_free(struct sc_dm_peer *list)
{
	while (list) {
		struct sc_dm_peer *p = list;
		list = p->next;
		munmap(p->hdr, p->ctl_size);
		p->prov->unmap(p->base, p->size);
		free(p);
	}
}

/* A free chunk for key, or -EAGAIN: the lowest free one.  A receiver that
 * returns its fragments promptly gets the same few chunks written again
 * while they are still in the cache; taken round the region in turn (as
 * before 0.4.3, from the header's hint), every write went to memory the
 * cache had long dropped, and the one copy of devmem ran slower than the
 * copy path's two (6.4 against 7.5 GB/s, 1 MiB messages; 12.4 now). */
int sc__dm_take_chunk(struct sc_dm_peer *p, uint64_t key)
{
	for (uint32_t i = 0; i < p->nchunks; i++) {
		uint64_t z = 0;
		if (atomic_load_explicit(&p->owner[i], memory_order_relaxed) == 0 &&
		    /* acquire: pairs with the release of chunk_free (the
		     * receiver is done with the chunk) or of
		     * sc__dm_untake_chunk */
		    atomic_compare_exchange_strong_explicit(&p->owner[i], &z, key,
							    memory_order_acquire,
							    memory_order_relaxed))
			return (int)i;
	}
	return -EAGAIN;
}

/* A chunk we took and put nothing in (the sender's reader had nothing)
 * goes back: no record names it, the receiver never saw it taken. */
void sc__dm_untake_chunk(struct sc_dm_peer *p, int chunk)
{
	/* release: pairs with the acquire of a taker's compare-and-swap
	 * (nothing of ours in the chunk to publish; the owner word only) */
	atomic_store_explicit(&p->owner[chunk], 0, memory_order_release);
}

bool sc__dm_any_free(struct sc_dm_peer *p)
{
	for (uint32_t i = 0; i < p->nchunks; i++)
		if (atomic_load_explicit(&p->owner[i], memory_order_relaxed) == 0)
			return true;
	return false;
}

/* Sleep until the receiver frees a chunk (free_seq moves from seq), at
 * most ms. */
void sc__dm_wait_chunk(struct sc_dm_peer *p, uint32_t seq, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	atomic_fetch_add_explicit(&p->hdr->waiters, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&p->hdr->free_seq, memory_order_seq_cst) == seq)
		SC_SYSCALL(SYS_futex, &p->hdr->free_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
	atomic_fetch_sub_explicit(&p->hdr->waiters, 1, memory_order_relaxed);
}

void sc__dm_stats(struct sc_dm_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&dm_lock);
	for (struct sc_dm_binding *b = bindings; b; b = b->next)
		st->bindings += !b->unbound;
	pthread_mutex_unlock(&dm_lock);
	/* (counters: relaxed, as SC_STAT_ADD) */
	st->bytes_into_regions = atomic_load_explicit(&sc__statp->dm_bytes_in, memory_order_relaxed);
	st->frags_delivered = atomic_load_explicit(&sc__statp->dm_frags, memory_order_relaxed);
	st->frags_outstanding = atomic_load_explicit(&sc__statp->dm_frags_out, memory_order_relaxed);
	st->waits = atomic_load_explicit(&sc__statp->dm_waits, memory_order_relaxed);
}

/* The binding id b of ours for region sharing (the group's peer maps it):
 * its region fd and chunk table fd, referenced while the group lives. */
int sc__dm_share_fds(uint32_t id, int *region_fd, int *ctl_fd)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&dm_lock);
	for (struct sc_dm_binding *b = bindings; b; b = b->next)
		if (b->id == id && b->hdr) {
			*region_fd = b->fd;
			*ctl_fd = b->ctl_fd;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&dm_lock);
	return rc;
}

/* ---- the public API (shortcut.h) ------------------------------------------- */

SC_API int sc_devmem_bind_rx(int fd)
{
	struct sc_dm_rx *probe;
	if (sc__dm_rx_new(&probe) == 0) {
		sc__dm_rx_free(probe);
		return -EEXIST;         /* loopback's one rx queue is bound */
	}
	return sc__dm_bind(fd, SC_DM_RX);
}

SC_API int sc_devmem_bind_tx(int fd)
{
	return sc__dm_bind(fd, SC_DM_TX);
}

SC_API int sc_devmem_unbind(unsigned int id)
{
	return sc__dm_unbind(id);
}
