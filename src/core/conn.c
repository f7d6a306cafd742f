/* SPDX-License-Identifier: MIT */
/*
 * Connection life cycle (connect, accept, shutdown, close — smc_close.c's
 * job), the wait path shared by send and receive, and introspection.
 * Public entry points keep errno as they found it.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "dmint.h"
#include "link.h"
#include "listener.h"
#include "notify.h"
#include "spin.h"
#include "stats.h"
#include "txrx.h"
#include "sys.h"


int sc__conn_new(struct sc_group *g, uint32_t slot, struct sc_conn **out)
{
	struct sc_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->g = g;
	c->slot = slot;
	c->side = g->side;
	c->s = sc__slot(g, slot);
	c->me = &c->s->side[c->side];
	c->peer = &c->s->side[!c->side];
	if (c->side == 0) {
		/* we allocate slots: the peer released this one (or never had
		 * it), so its memory is ours to reset */
		memset(c->s, 0, sizeof(*c->s));
		atomic_store_explicit(&c->peer->cell, SC_CELL_NONE, memory_order_relaxed);
		for (int i = 0; i < SC_XCELLS; i++)
			atomic_store_explicit(&c->peer->cellx[i], SC_CELL_NONE, memory_order_relaxed);
	}
	atomic_store_explicit(&c->me->cell, SC_CELL_NONE, memory_order_relaxed);
	for (int i = 0; i < SC_XCELLS; i++)
		atomic_store_explicit(&c->me->cellx[i], SC_CELL_NONE, memory_order_relaxed);
	atomic_store_explicit(&c->me->pid, sc__pid(), memory_order_relaxed);
	sc__ring_init(&c->tx, &c->s->ring[c->side], sc__ring_data(g, slot, c->side),
		      g->ring_size[c->side]);
	sc__ring_init(&c->rx, &c->s->ring[!c->side], sc__ring_data(g, slot, !c->side),
		      g->ring_size[!c->side]);
	pthread_mutex_init(&c->bindlock, NULL);
	/* (not shared yet: relaxed) */
	atomic_store_explicit(&c->cell, SC_CELL_NONE, memory_order_relaxed);
	for (int i = 0; i < SC_XCELLS; i++)
		atomic_store_explicit(&c->cellx[i], SC_CELL_NONE, memory_order_relaxed);
	c->spin_ns[0] = c->spin_ns[1] = sc__cfg.spin_ns;
	g->conns[slot] = c;
	g->nconns++;
	*out = c;
	return 0;
}

void sc__conn_set_flags(struct sc_conn *c, uint32_t f)
{
	/* or-ed in place: the control thread may add ABORT while the owner
	 * closes; release: data published before (prod) is visible first */
	atomic_fetch_or_explicit(&c->me->flags, f, memory_order_release);
}

int sc__conn_proto_error(struct sc_conn *c)
{
	if (sc__conn_set_err(c, -EPROTO)) {
		SC_STAT_ADD(proto_errors, 1);
		SC_STAT_ADD(conns_aborted, 1);
		/* the peer (if it is only buggy) sees a reset; once only, so
		 * a failing notification cannot recurse */
		sc__conn_set_flags(c, SC_SF_ABORT);
		sc__notify_peer(c);
	}
	return -EPROTO;
}

void sc__conn_peer_dead(struct sc_conn *c)
{
	/* peer death, as TCP shows it: a FIN if the peer had closed or read
	 * everything we sent, else a reset (acquire: pairs with the release
	 * in the peer's sc__conn_set_flags, as sc__peer_flags) */
	uint32_t pf = atomic_load_explicit(&c->peer->flags, memory_order_acquire);
	uint64_t pc = atomic_load_explicit(&c->s->consumed[!c->side].rx_consumed,
					   memory_order_relaxed);
	uint64_t pp = atomic_load_explicit(&c->tx.h->prod, memory_order_relaxed);
	if (!(pf & SC_SF_ABORT) && (pf & SC_SF_CLOSED || pc == pp))
		sc__conn_add_lflags(c, SC_LF_PEER_GONE);
	else if (sc__conn_set_err(c, -ECONNRESET))
		SC_STAT_ADD(conns_aborted, 1);
	sc__notify_self(c);
}

int sc__conn_reset(struct sc_conn *c)
{
	if (sc__conn_set_err(c, -ECONNRESET))
		SC_STAT_ADD(conns_aborted, 1);
	return sc__conn_err(c);
}

uint32_t sc__peer_flags(struct sc_conn *c)
{
	/* acquire: pairs with the peer's release in sc__conn_set_flags, so a
	 * WR_DONE seen here comes with every byte produced before it */
	uint32_t f = atomic_load_explicit(&c->peer->flags, memory_order_acquire);

	/* bits that do not exist, a switch to TCP where there is no TCP to
	 * switch to (the C API, without the interposer), or a refusal where
	 * none can come (only a listener refuses, before it has sent a byte:
	 * never to the accepting side, never after we received something):
	 * the peer's scribble, not a state */
	if ((f & ~SC_SF_ALL) || (!sc__switch_hook && (f & (SC_SF_FROZEN | SC_SF_ONTCP))) ||
	    ((f & SC_SF_REFUSED) && (c->side == 1 ||
				     atomic_load_explicit(&c->bytes_received, memory_order_relaxed)))) {
		sc__conn_proto_error(c);
		return SC_SF_ABORT;
	}
	return f;
}

/* Free the local half; the caller holds no lock. */
/* Its counters into the process totals (each once: the closing thread
 * folds them before the slot is let go, which may be much later). */
static void conn_fold(struct sc_conn *c)
{
	/* (relaxed: counts; the exchange takes each once) */
	SC_STAT_ADD(bytes_sent, atomic_exchange_explicit(&c->bytes_sent, 0, memory_order_relaxed));
	SC_STAT_ADD(bytes_received, atomic_exchange_explicit(&c->bytes_received, 0,
							      memory_order_relaxed));
	SC_STAT_ADD(spin_hits, atomic_exchange_explicit(&c->spin_hits, 0, memory_order_relaxed));
}

static void conn_free(struct sc_conn *c, uint32_t last_flags)
{
	struct sc_group *g = c->g;

	pthread_mutex_lock(&c->bindlock);
	/* (relaxed: written under bindlock, which we hold) */
	struct sc_chan *ch = atomic_load_explicit(&c->chan, memory_order_relaxed);
	if (ch)
		sc__chan_detach(ch, c);
	for (int i = 0; i < SC_XCELLS; i++) {
		ch = atomic_load_explicit(&c->chanx[i], memory_order_relaxed);
		if (ch)
			sc__chan_detachx(ch, c, i);
	}
	pthread_mutex_unlock(&c->bindlock);
	if (c->own)
		sc__chan_free(c->own);
	pthread_mutex_lock(&g->lock);
	conn_fold(c);
	/* our cell may go to another channel: the peer must not wake it for
	 * this slot any more */
	atomic_store_explicit(&c->me->cell, SC_CELL_NONE, memory_order_relaxed);
	for (int i = 0; i < SC_XCELLS; i++)
		atomic_store_explicit(&c->me->cellx[i], SC_CELL_NONE, memory_order_relaxed);
	sc__conn_set_flags(c, last_flags | SC_SF_RELEASED);
	sc__group_release_slot(g, c->slot);
	pthread_mutex_unlock(&g->lock);
	pthread_mutex_destroy(&c->bindlock);
	free(c);
}

void sc__conn_refuse(struct sc_conn *c)
{
	sc__conn_set_flags(c, SC_SF_REFUSED | SC_SF_ABORT);
	sc__notify_peer(c);
	SC_STAT_ADD(conns_refused, 1);
	conn_free(c, 0);
}

/* ---- waiting ---------------------------------------------------------- */

static uint64_t now_ns(void)
{
	return sc__now_ns();
}

/* Bind c to its own channel if it has none (first wait); bindlock held. */
static int ensure_channel(struct sc_conn *c)
{
	int rc;

	if (atomic_load_explicit(&c->chan, memory_order_relaxed))      /* (ours) */
		return 0;
	if (!c->own && (rc = sc__chan_new(true, &c->own)))
		return rc;
	return sc__chan_attach(c->own, c);
}

int sc__conn_channel(struct sc_conn *c)
{
	pthread_mutex_lock(&c->bindlock);
	int rc = ensure_channel(c);
	pthread_mutex_unlock(&c->bindlock);
	return rc;
}

/*
 * Wait until cond(c) holds (caller holds the direction's lock, which is
 * dropped while sleeping).  Spins up to the adaptive budget, then announces
 * itself (flag, cell armed, full barrier), re-checks and sleeps.
 */
static int conn_wait(struct sc_conn *c, bool tx, bool (*cond)(struct sc_conn *),
		     uint64_t deadline_ns);

int sc__conn_wait(struct sc_conn *c, bool tx, bool (*cond)(struct sc_conn *))
{
	/* -EINTR as recv(2) gives it: the untimed futex wait is restarted by
	 * the kernel after a handler with SA_RESTART (-ERESTARTSYS, as a
	 * socket wait without a timeout), so -EINTR means a handler without
	 * it interrupted us */
	return conn_wait(c, tx, cond, UINT64_MAX);
}

int sc__conn_wait_avail(struct sc_conn *c, int64_t want, uint64_t deadline_ns)
{
	int rc = 0;

	sc__lock(&c->rxlock);
	c->lowat_want = want;
	/* a wake-up is only a hint (another connection's, an earlier
	 * arrival): look again after each */
	while (!rc && !sc__rx_lowat_ready(c))
		rc = conn_wait(c, false, sc__rx_lowat_ready, deadline_ns);
	sc__unlock(&c->rxlock);
	return rc;
}

int sc__conn_wait_ready(struct sc_conn *c, bool tx, uint64_t deadline_ns)
{
	struct sc_lock *lk = tx ? &c->txlock : &c->rxlock;
	bool (*cond)(struct sc_conn *) = tx ? sc__tx_ready : sc__rx_ready;
	int rc = 0;

	sc__lock(lk);
	if (!cond(c))
		rc = conn_wait(c, tx, cond, deadline_ns);
	sc__unlock(lk);
	return rc;
}

static int conn_wait(struct sc_conn *c, bool tx, bool (*cond)(struct sc_conn *),
		     uint64_t deadline_ns)
{
	uint32_t budget = sc__spin_budget(c, tx);

	if (budget) {
		uint64_t t0 = now_ns();
		for (unsigned i = 1;; i++) {
			if (cond(c)) {
				sc__counter_add(&c->spin_hits, 1);
				sc__spin_done(c, tx, budget, true);
				return 0;
			}
			/* a receiver waits for the line the next bytes land in:
			 * ask for it now, so its transfer overlaps the cursor's */
			if (!tx)
				__builtin_prefetch(c->rx.data + (c->rx.cons & (c->rx.size - 1)));
			sc__cpu_relax();
			if (!(i & 63) && now_ns() - t0 > budget)
				break;
		}
	}
	sc__spin_done(c, tx, budget, false);
	int rc = sc__conn_channel(c);
	if (rc)
		return rc;
	/* every blocked call sleeps on the cell's wake sequence (one system
	 * call each way).  A cell whose channel fd someone polls (sc_conn_fd,
	 * a shared channel) is armed for the poller instead, and we register
	 * as a futex waiter so the waker wakes us too. */
	struct sc_cell *cell = &c->g->my_cells[sc__conn_cell(c)];
	bool efd = sc__conn_chan(c)->pfd >= 0;
	_Atomic uint32_t *flag = tx ? &c->tx.h->tx_blocked : &c->rx.h->rx_armed;

	if (efd)
		atomic_fetch_add_explicit(&cell->futex_waiters, 1, memory_order_seq_cst);
	/* the cell's one-shot token before our flag: a waker that sees the
	 * flag then finds the token (or another waker already used it and
	 * bumped the sequence read before arming) */
	uint32_t seq = sc__chan_arm_conn(c, efd ? SC_ARM_POLL : SC_ARM_FUTEX);
	atomic_fetch_add_explicit(flag, 1, memory_order_seq_cst);
	/* never sleep on unpublished consumption: a producer waiting for that
	 * space would wait for us while we wait for it */
	if (!tx && sc__ring_update_cons(&c->rx, true))
		sc__notify_peer(c);
	/* flag and token visible before we look at the ring once more; pairs
	 * with the waker's cursor store, barrier, flag load */
	atomic_thread_fence(memory_order_seq_cst);
	if (!cond(c)) {
		atomic_fetch_add_explicit(&c->sleeps, 1, memory_order_relaxed);
		/* sleep without the direction's lock (another sender may go
		 * on, as with the kernel's sk_wait_event); the caller
		 * re-checks everything */
		struct sc_lock *lk = tx ? &c->txlock : &c->rxlock;
		sc__unlock(lk);
		rc = sc__conn_sleep(cell, seq, deadline_ns);
		sc__lock(lk);
	}
	/* only we clear our flag: done waiting */
	atomic_fetch_sub_explicit(flag, 1, memory_order_relaxed);
	if (efd)
		atomic_fetch_sub_explicit(&cell->futex_waiters, 1, memory_order_relaxed);
	return rc;
}

/* Nonblocking caller about to return EAGAIN: ask for a wake-up on the next
 * change (edge), then check once more.  True if it is ready after all. */
bool sc__conn_arm_edge(struct sc_conn *c, bool tx, bool (*cond)(struct sc_conn *))
{
	_Atomic uint32_t *flag = tx ? &c->tx.h->tx_blocked : &c->rx.h->rx_armed;

	/* someone may be polling the connection's fd: make it signal again
	 * (token first, then the flag, as in sc__conn_wait) */
	pthread_mutex_lock(&c->bindlock);
	sc__chan_rearm_poll(c);
	pthread_mutex_unlock(&c->bindlock);
	if (!(atomic_load_explicit(flag, memory_order_relaxed) & SC_ARM_EDGE))
		atomic_fetch_or_explicit(flag, SC_ARM_EDGE, memory_order_seq_cst);
	if (!tx && sc__ring_update_cons(&c->rx, true))
		sc__notify_peer(c);
	atomic_thread_fence(memory_order_seq_cst);
	return cond(c);
}

/* ---- listener and connect --------------------------------------------- */

static int unix_addr(const char *path, struct sockaddr_un *sa, socklen_t *len)
{
	size_t plen = strlen(path);

	if (plen == 0 || plen >= sizeof(sa->sun_path))
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, plen);
	if (path[0] == '@')
		sa->sun_path[0] = 0;
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + (path[0] != '@'));
	return 0;
}

SC_API int sc_listen(const char *path, int backlog, struct sc_listener **out)
{
	int saved = errno, rc;
	struct sockaddr_un sa;
	socklen_t salen;
	struct sc_listener *l;

	if ((rc = sc__config_load()))
		return rc;
	if (!path || !out || backlog < 0 || (rc = unix_addr(path, &sa, &salen)))
		return rc ? rc : -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	strcpy(l->path, path);
	l->max = backlog ? backlog : 128;
	pthread_mutex_init(&l->lock, NULL);
	l->efd = sc__fd_park(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (l->efd < 0) {
		rc = -errno;
		goto err_free;
	}
	l->sock = sc__fd_park(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (l->sock < 0) {
		rc = -errno;
		goto err_efd;
	}
	if (path[0] != '@') {
		struct stat st;
		/* replace a stale socket file, never anything else */
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(path);
	}
	if (bind(l->sock, (struct sockaddr *)&sa, salen) < 0 || listen(l->sock, 4096) < 0) {
		rc = -errno;
		goto err_sock;
	}
	rc = sc__listener_register(l);
	if (rc)
		goto err_sock;
	*out = l;
	errno = saved;
	return 0;
err_sock:
	close(l->sock);
err_efd:
	close(l->efd);
err_free:
	pthread_mutex_destroy(&l->lock);
	free(l);
	errno = saved;
	return rc;
}

int sc__listener_push(struct sc_listener *l, struct sc_conn *c)
{
	int rc = 0;

	if (l->deliver)
		return l->deliver(l, c);
	pthread_mutex_lock(&l->lock);
	if (l->closed || l->count >= l->max) {
		rc = -ECONNREFUSED;
	} else {
		c->next = NULL;
		if (l->tail)
			l->tail->next = c;
		else
			l->head = c;
		l->tail = c;
		if (l->count++ == 0)
			sc__efd_wake(l->efd);
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

static struct sc_conn *listener_pop(struct sc_listener *l)
{
	struct sc_conn *c;

	pthread_mutex_lock(&l->lock);
	c = l->head;
	if (c) {
		l->head = c->next;
		if (!l->head)
			l->tail = NULL;
		/* readable exactly while the backlog is not empty */
		if (--l->count == 0)
			sc__efd_drain(l->efd);
		c->next = NULL;
	}
	pthread_mutex_unlock(&l->lock);
	return c;
}

SC_API int sc_accept(struct sc_listener *l, struct sc_conn **out, int flags)
{
	int saved = errno;
	struct sc_conn *c;

	if (!l || !out)
		return -EINVAL;
	while (!(c = listener_pop(l))) {
		if (flags & SC_NONBLOCK) {
			errno = saved;
			return -EAGAIN;
		}
		struct pollfd p = { .fd = l->efd, .events = POLLIN };
		if (poll(&p, 1, -1) < 0 && errno != EINTR) {
			int rc = -errno;
			errno = saved;
			return rc;
		}
	}
	c->nonblock = flags & SC_NONBLOCK;
	*out = c;
	errno = saved;
	return 0;
}

SC_API int sc_listener_fd(const struct sc_listener *l)
{
	return l ? l->efd : -EINVAL;
}

SC_API void sc_listener_close(struct sc_listener *l)
{
	int saved = errno;
	struct sc_conn *c;

	if (!l)
		return;
	sc__listener_unregister(l);
	pthread_mutex_lock(&l->lock);
	l->closed = true;
	pthread_mutex_unlock(&l->lock);
	/* connections nobody accepted are refused, as TCP resets them */
	while ((c = listener_pop(l)))
		sc__conn_refuse(c);
	close(l->sock);
	close(l->efd);
	if (l->path[0] != '@')
		unlink(l->path);
	pthread_mutex_destroy(&l->lock);
	free(l);
	errno = saved;
}

SC_API int sc_connect(const char *path, struct sc_conn **out, int flags)
{
	return sc__connect_tagged(path, 0, 0, NULL, 0, 0, flags, NULL, NULL, out);
}

/* Group locked, slot ready: the OPEN goes to a client spinning for it
 * (its word said SPIN, with tag), if the peer process has joined. */
static bool open_quietly(struct sc_group *g, uint32_t slot, uint64_t tag,
			 _Atomic uint64_t *quiet)
{
	const struct sc_seg_hdr *h = (const struct sc_seg_hdr *)g->base;
	uint64_t spin = sc__quiet_spin(tag);
	/* acquire: its HELLO done, the group in its list; seq_cst: the slot,
	 * its tag and early bytes before the word that names them */
	return quiet && atomic_load_explicit(&h->joined, memory_order_acquire) == 1 &&
	       atomic_compare_exchange_strong_explicit(quiet, &spin, sc__quiet_word(g->id, slot),
						       memory_order_seq_cst, memory_order_seq_cst);
}

int sc__connect_tagged(const char *path, uint64_t tag, uint64_t peer_ident,
		       const uint8_t *early, uint32_t elen, uint64_t max_seg, int flags,
		       _Atomic uint64_t *quiet, bool *quietly, struct sc_conn **out)
{
	int saved = errno, rc;
	struct sc_group *g;
	struct sc_conn *c;
	uint32_t slot;

	if ((rc = sc__config_load()))
		return rc;
	if (!path || !out)
		return -EINVAL;
	rc = sc__group_for_connect(path, max_seg, peer_ident, &g, &slot);
	if (rc) {
		errno = saved;
		return rc;
	}
	rc = sc__conn_new(g, slot, &c);
	if (rc) {
		g->slot_busy[slot] = false;
		pthread_mutex_unlock(&g->lock);
		errno = saved;
		return rc;
	}
	sc__conn_set_flags(c, SC_SF_OPEN);
	if (elen > SC_EARLY_MAX || elen > g->ring_size[!c->side])
		elen = 0;       /* (the caller's bound) */
	if (elen) {
		/* the peer's first bytes, as if it had sent them: its
		 * producer cursor starts past them (the OPEN says so) */
		memcpy(sc__ring_data(g, slot, !c->side), early, elen);
		/* release: the bytes first; pairs with the consumer's
		 * acquire in sc__ring_avail */
		atomic_store_explicit(&c->s->ring[!c->side].prod, elen, memory_order_release);
	}
	/* (the tag before the OPEN: a quiet one's reader checks it) */
	c->tag = tag;
	atomic_store_explicit(&c->me->tag, tag, memory_order_relaxed);
	struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_OPEN,
			    .version = SC_LAYOUT_VERSION, .slot = slot, .early = elen,
			    .tag = tag };
	bool q = tag && open_quietly(g, slot, tag, quiet);
	if (quietly)
		*quietly = q;
	rc = q ? 0 : sc__group_send(g, &m, -1);
	pthread_mutex_unlock(&g->lock);
	if (rc) {
		conn_free(c, SC_SF_ABORT);
		/* the peer never heard of the slot: it is ours to reuse */
		pthread_mutex_lock(&g->lock);
		g->slot_busy[slot] = false;
		pthread_mutex_unlock(&g->lock);
		errno = saved;
		/* -EAGAIN: the listening process does not drain its control
		 * socket (stopped, or flooded); like a full SYN backlog */
		return rc == -EPIPE ? -ECONNREFUSED : rc;
	}
	SC_STAT_ADD(conns_opened, 1);
	c->nonblock = flags & SC_NONBLOCK;
	*out = c;
	errno = saved;
	return 0;
}

/* ---- shutdown and close ----------------------------------------------- */

SC_API int sc_shutdown(struct sc_conn *c, int how)
{
	int saved = errno;

	if (!c || (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR))
		return -EINVAL;
	if (how != SHUT_WR) {
		sc__conn_add_lflags(c, SC_LF_SHUT_RD);
		sc__conn_set_flags(c, SC_SF_RD_DONE);
		/* a receiver of ours blocked on this connection returns 0 */
		pthread_mutex_lock(&c->g->lock);
		sc__notify_self(c);
		pthread_mutex_unlock(&c->g->lock);
	}
	if (how != SHUT_RD) {
		sc__lock(&c->txlock);
		sc__tx_flush_locked(c);         /* held bytes go before the end */
		bool first = !(sc__conn_add_lflags(c, SC_LF_SHUT_WR) & SC_LF_SHUT_WR);
		if (first) {
			sc__conn_set_flags(c, SC_SF_WR_DONE);
			sc__notify_peer(c);
		}
		sc__unlock(&c->txlock);
		if (first) {
			/* our own state changed (a hang-up, if the peer is
			 * done too): a poller of ours hears of it */
			pthread_mutex_lock(&c->g->lock);
			sc__notify_self(c);
			pthread_mutex_unlock(&c->g->lock);
		}
	}
	errno = saved;
	return 0;
}

bool sc__close_begin(struct sc_conn *c)
{
	int saved = errno;
	uint32_t f;

	sc__lock(&c->txlock);
	sc__tx_flush_locked(c);         /* held bytes go before the end */
	sc__unlock(&c->txlock);
	sc__lock(&c->rxlock);
	int64_t unread = sc__ring_avail(&c->rx);
	sc__unlock(&c->rxlock);
	/* acquire: as sc__peer_flags */
	uint32_t pf = atomic_load_explicit(&c->peer->flags, memory_order_acquire);
	if (sc__conn_err(c) || (pf & SC_SF_ABORT)) {
		f = SC_SF_CLOSED;       /* already reset: nothing more to say */
	} else if (c->linger0 || (unread != 0 && !((sc__conn_lflags(c) & SC_LF_SHUT_WR) &&
						       (pf & SC_SF_WR_DONE)))) {
		/* (both FINs exchanged: the kernel's socket is closed
		 * already, and its close sends no reset) */
		f = SC_SF_ABORT;
		SC_STAT_ADD(conns_aborted, 1);
	} else {
		f = SC_SF_WR_DONE | SC_SF_CLOSED;
	}
	sc__conn_set_flags(c, f);
	sc__notify_peer(c);
	SC_STAT_ADD(conns_closed, 1);
	conn_fold(c);
	errno = saved;
	return f == (SC_SF_WR_DONE | SC_SF_CLOSED);
}

void sc__conn_release(struct sc_conn *c)
{
	int saved = errno;
	conn_free(c, 0);
	errno = saved;
}

SC_API int sc_close(struct sc_conn *c)
{
	if (!c)
		return -EINVAL;
	sc__close_begin(c);
	sc__conn_release(c);
	return 0;
}

SC_API void sc_set_bufs(struct sc_conn *c, int sndbuf, int rcvbuf)
{
	if (sndbuf >= 0)
		atomic_store_explicit(&c->sndbuf, (uint32_t)sndbuf, memory_order_relaxed);
	if (rcvbuf >= 0) {
		/* seq_cst: the wider window before sc__notify_peer's look
		 * at the peer's cell; a sender of the peer's arms, fences,
		 * then reads it (tx.c): Dekker's pattern */
		uint32_t old = atomic_exchange_explicit(&c->me->rcvbuf, (uint32_t)rcvbuf,
							memory_order_seq_cst);
		uint32_t o = old ? old : SC_WIN_RCV_DEFAULT;
		uint32_t n = rcvbuf ? (uint32_t)rcvbuf : SC_WIN_RCV_DEFAULT;
		if (n > o) {
			/* a wider window: a sender of the peer's that waits
			 * for room may go on */
			sc__notify_peer(c);
		}
	}
}

SC_API void sc_set_linger0(struct sc_conn *c, int on)
{
	c->linger0 = on;
}

SC_API void sc_set_nonblock(struct sc_conn *c, int on)
{
	c->nonblock = on;
}

SC_API void sc_conn_set_user(struct sc_conn *c, void *user)
{
	c->user = user;
}

SC_API void *sc_conn_user(const struct sc_conn *c)
{
	return c->user;
}

/* ---- switching back to TCP -------------------------------------------- */

void sc__switch_freeze(struct sc_conn *c)
{
	if (sc__conn_sw(c) >= SC_SW_FROZEN)
		return;
	sc__conn_set_sw(c, SC_SW_FROZEN);
	/* both direction locks are held: no read is half done, so the
	 * consumed cursor is exact; the flag's release orders it */
	atomic_store_explicit(&c->s->consumed[c->side].rx_consumed, c->rx.cons,
			      memory_order_relaxed);
	sc__conn_set_flags(c, SC_SF_FROZEN);
	struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_SWITCH,
			    .version = SC_LAYOUT_VERSION, .slot = c->slot, .tag = c->tag };
	pthread_mutex_lock(&c->g->lock);
	if (!sc__group_dead(c->g))
		sc__group_send(c->g, &m, -1);  /* lost (full): the peer sees the flag */
	/* our blocked calls wake, see the freeze and go on over TCP */
	sc__notify_self(c);
	pthread_mutex_unlock(&c->g->lock);
	/* and the peer's, in case the message was lost */
	sc__notify_peer(c);
}

int sc__switch_range(struct sc_conn *c, uint64_t *from, uint64_t *to)
{
	/* acquire: as sc__peer_flags (the peer's final cursor before FROZEN) */
	uint32_t pf = atomic_load_explicit(&c->peer->flags, memory_order_acquire);
	bool dead = sc__group_dead(c->g);

	*from = *to = c->tx.prod;
	/* frozen first: its kernel socket lives on (in an exec'd image, in
	 * the process it was sent to), whatever it did with the slot since;
	 * so does a dead peer's that had forked (its cursor is final; judged
	 * by its flags too: sc__group_kill marks the group dead before it
	 * sets SC_LF_DEATH_SWITCH, and a switch in between re-sent nothing) */
	bool forked = (pf & (SC_SF_FORKED | SC_SF_CLOSED | SC_SF_ABORT)) == SC_SF_FORKED;
	if (!(pf & SC_SF_FROZEN) &&
	    !(dead && c->tag && (forked || (sc__conn_lflags(c) & SC_LF_DEATH_SWITCH)))) {
		if ((pf & (SC_SF_CLOSED | SC_SF_ABORT | SC_SF_RELEASED | SC_SF_REFUSED)) ||
		    dead || sc__conn_err(c))
			return 1;       /* nobody reads it any more: nothing to re-send */
		return 0;
	}
	/* the peer's exact cursor, final since it froze (acquire above) */
	uint64_t pc = atomic_load_explicit(&c->s->consumed[!c->side].rx_consumed,
					   memory_order_relaxed);
	if (!sc__cursor_valid(c->tx.cons, pc, c->tx.prod)) {
		sc__conn_proto_error(c);
		return 1;
	}
	*from = pc;
	return 1;
}

void sc__switch_done(struct sc_conn *c)
{
	sc__conn_set_sw(c, SC_SW_TCP);
	sc__conn_set_flags(c, SC_SF_ONTCP);
	pthread_mutex_lock(&c->g->lock);
	sc__notify_self(c);     /* pollers and epoll sets look again: TCP now */
	pthread_mutex_unlock(&c->g->lock);
}

void sc__switch_release(struct sc_conn *c)
{
	SC_STAT_ADD(conns_closed, 1);
	conn_free(c, SC_SF_CLOSED);
}

/* ---- introspection ---------------------------------------------------- */

SC_API int sc_conn_events(struct sc_conn *c)
{
	int saved = errno;
	int ev = 0;
	uint32_t pf;
	int64_t av, sp;

	sc__lock(&c->rxlock);
	av = sc__ring_avail(&c->rx);
	sc__unlock(&c->rxlock);
	sc__lock(&c->txlock);
	uint32_t win = sc__tx_win(c);
	sp = sc__tx_space(c, win / 3 + 1);
	/* framed (devmem): writable when a record fits and a chunk is free */
	bool dm_full = c->dm_peer && sp >= 0 && !sc__dm_any_free(c->dm_peer);
	sc__unlock(&c->txlock);
	pf = sc__peer_flags(c);
	uint32_t lf = sc__conn_lflags(c);
	bool rd_done = (pf & (SC_SF_WR_DONE | SC_SF_CLOSED)) || (lf & SC_LF_PEER_GONE);
	bool err = sc__conn_err(c) || av < 0 || sp < 0 || (pf & SC_SF_ABORT);

	if (av != 0 || rd_done || err || (lf & SC_LF_SHUT_RD))
		ev |= SC_EV_IN;
	if (err)
		ev |= SC_EV_ERR | SC_EV_HUP | SC_EV_OUT;
	else if ((sp > (int64_t)(win / 3) && !dm_full) || (lf & SC_LF_SHUT_WR) ||
		 (pf & SC_SF_CLOSED))
		ev |= SC_EV_OUT;
	if (rd_done)
		ev |= SC_EV_RDHUP;
	if (rd_done && (lf & SC_LF_SHUT_WR))
		ev |= SC_EV_HUP;
	errno = saved;
	return ev;
}

int sc__conn_poll_arm(struct sc_conn *c, bool want_out)
{
	return sc__conn_poll_arm_(c, want_out, false);
}

int sc__conn_poll_arm_(struct sc_conn *c, bool want_out, bool sleeper)
{
	int saved = errno;
	int rc = sc__conn_channel(c);

	pthread_mutex_lock(&c->bindlock);
	if (!rc)
		rc = sc__chan_ensure_pfd(sc__conn_chan(c));
	if (!rc) {
		/* report the next change even if nobody hit EAGAIN yet
		 * (token first, then the flags).  A shared channel's token is
		 * its own to arm (sc_chan_wait drains its fd when it re-arms a
		 * token a waker took; arming it here would skip that drain) */
		struct sc_chan *ch = sc__conn_chan(c);
		if (ch->private_ || sleeper)
			atomic_store_explicit(&c->g->my_cells[sc__conn_cell(c)].armed, SC_ARM_POLL,
					      memory_order_relaxed);
		c->polled = true;
		c->polled_out = want_out;
		/* seq_cst: our flags before the caller's look at the
		 * rings; the peer's cursor store before its load of them
		 * (Dekker's pattern, as sc__conn_arm_edge) */
		atomic_fetch_or_explicit(&c->rx.h->rx_armed, SC_ARM_EDGE, memory_order_seq_cst);
		/* room is signalled only to a poller that asks for it (as
		 * the kernel's write-space wake-up): otherwise every read by
		 * the peer would wake us */
		if (want_out)
			atomic_fetch_or_explicit(&c->tx.h->tx_blocked, SC_ARM_EDGE,
						 memory_order_seq_cst);
		else
			atomic_thread_fence(memory_order_seq_cst);
		rc = sc__conn_chan(c)->pfd;
	}
	pthread_mutex_unlock(&c->bindlock);
	errno = saved;
	return rc;
}

SC_API int sc_conn_fd(struct sc_conn *c)
{
	return sc__conn_poll_arm(c, true);
}

SC_API int sc_conn_info(struct sc_conn *c, struct sc_conn_info *info)
{
	memset(info, 0, sizeof(*info));
	info->conn_id = c->g->id << 8 | c->slot;
	info->slot = c->slot;
	info->side = (uint32_t)c->side;
	info->rx_ring_size = c->rx.size;
	info->tx_ring_size = c->tx.size;
	sc__lock(&c->rxlock);
	info->rx_prod = c->rx.prod;
	info->rx_cons = c->rx.cons;
	/* (counters for people: relaxed) */
	info->bytes_received = atomic_load_explicit(&c->bytes_received, memory_order_relaxed);
	sc__unlock(&c->rxlock);
	sc__lock(&c->txlock);
	info->tx_prod = c->tx.prod;
	info->tx_cons = c->tx.cons;
	info->bytes_sent = atomic_load_explicit(&c->bytes_sent, memory_order_relaxed);
	sc__unlock(&c->txlock);
	info->wakeups_sent = atomic_load_explicit(&c->wakeups, memory_order_relaxed);
	info->sleeps = atomic_load_explicit(&c->sleeps, memory_order_relaxed);
	info->peer_pid = c->g->peer_pid;
	info->state = sc_conn_events(c);
	return 0;
}

SC_API int sc_config_check(void)
{
	return sc__config_load();
}
