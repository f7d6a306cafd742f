/* SPDX-License-Identifier: MIT */
/*
 * Completion channels and the wake-up protocol.
 *
 * Waker (peer or local event):           Sleeper (channel owner):
 *   publish cursor / flags                  seq = cell.wake_seq
 *   full barrier                            cell.armed = FUTEX or EFD
 *   if the owner's rx_armed/tx_blocked:     rx_armed/tx_blocked += 1
 *     set ready bit of slot in cell         full barrier
 *     full barrier                          re-check condition / ready bits
 *     if armed: CAS(armed → 0), then        sleep: futex_wait(wake_seq, seq)
 *       bump wake_seq + FUTEX_WAKE,                (sc_chan_wait: poll its fd)
 *       or send on its wake socket          rx_armed/tx_blocked -= 1
 * Either the waker sees the flags, or the sleeper sees the state change: no
 * lost wake-up, and no system call while the sleeper is awake.  The flags
 * are the owner's (the waker only reads them); the armed token is one-shot.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <limits.h>
#include <linux/futex.h>

#include "rawsys.h"
#include <sys/syscall.h>
#include <unistd.h>

#include "conn.h"
#include "link.h"
#include "notify.h"
#include "stats.h"
#include "sys.h"


/* The channel may stop being quiet (struct sc_chan).  seq_cst, as the
 * loads of epoch and quiet_at in sc_chan_wait and sc__chan_quiet: a move
 * made before a token is armed (or a fd drained) must be seen by a
 * waiter that reads epoch before it arms and collects (its epoch load,
 * arming, fence, collect; our move, then the token or drain). */
static void epoch_move(struct sc_chan *ch)
{
	atomic_fetch_add_explicit(&ch->epoch, 1, memory_order_seq_cst);
}
static void drain_fd(struct sc_chan *ch);
static int add_wake_socket(struct sc_chan *ch, struct sc_chan_cell *cc);

/* ch->lfd, read where ch->lock is not held (a waker: the group's lock,
 * or none); acquire: pairs with the release in sc__chan_ensure_pfd (the
 * eventfd made, in the channel's set). */
static int lfd_of(struct sc_chan *ch)
{
	return __atomic_load_n(&ch->lfd, __ATOMIC_ACQUIRE);
}

/*
 * Idle cells.  A cell whose last connection left stays in a shared
 * channel (an epoll set's, one of sc_chan_open's) with its wake socket,
 * for the group's next connection: a client that opens one connection
 * after another to an epoll server (one at a time: each the group's only
 * one) cost the server a socketpair, an epoll_ctl and a CELL message per
 * connection, and the client's control thread a wake-up to take the
 * socket in (docs/profile.md, fifteenth pass).  At most CHAN_IDLE_MAX a
 * channel, none of a dead group (dropped at the next wait that re-arms),
 * and only while the group has half its cells free; the group is not
 * freed while a channel holds one of its cells (sc__group_hold).
 */
#define CHAN_IDLE_MAX 8

/* Drop cells[i], one of the idle if idle (ch->lock held, or ch the
 * caller's alone). */
static void drop_cell(struct sc_chan *ch, int i, bool idle)
{
	struct sc_chan_cell *cc = &ch->cells[i];
	struct sc_group *g = cc->g;

	pthread_mutex_lock(&g->lock);
	sc__group_cell_free(g, cc->idx);
	if (idle) {
		ch->nidle--;
		sc__group_unhold(g);    /* (g may be freed once unlocked) */
	}
	pthread_mutex_unlock(&g->lock);
	if (cc->rfd >= 0)
		close(cc->rfd);
	*cc = ch->cells[--ch->ncells];
	atomic_store_explicit(&ch->ncells_seen, ch->ncells, memory_order_relaxed);
}

/* cells[i]'s last connection left (ch->lock held): keep it idle or drop it. */
static void cell_emptied(struct sc_chan *ch, int i)
{
	struct sc_chan_cell *cc = &ch->cells[i];
	struct sc_group *g = cc->g;
	bool keep = !ch->private_ && cc->rfd >= 0 && ch->nidle < CHAN_IDLE_MAX;

	if (keep) {
		pthread_mutex_lock(&g->lock);
		keep = g->cells_used <= SC_MAX_CELLS / 2 && sc__group_hold(g);
		pthread_mutex_unlock(&g->lock);
	}
	if (keep) {
		ch->nidle++;
		return;
	}
	drop_cell(ch, i, false);
}

/* The idle cells of dead groups go (ch->lock held). */
static void sweep_idle(struct sc_chan *ch)
{
	for (int i = 0; ch->nidle && i < ch->ncells; )
		if (!ch->cells[i].nconns && sc__group_dead(ch->cells[i].g))
			drop_cell(ch, i, true);
		else
			i++;
}

int sc__chan_new(bool private_, struct sc_chan **out)
{
	struct sc_chan *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return -ENOMEM;
	ch->pfd = ch->lfd = -1;
	ch->private_ = private_;
	pthread_mutex_init(&ch->lock, NULL);
	/* a connection's own channel needs no fd while it is only slept on
	 * (futex); one that is polled gets its fds later */
	if (!private_) {
		int rc = sc__chan_ensure_pfd(ch);
		if (rc) {
			sc__chan_free(ch);
			return rc;
		}
	}
	*out = ch;
	return 0;
}

void sc__chan_free(struct sc_chan *ch)
{
	/* (only idle cells are left: every connection was detached) */
	while (ch->ncells)
		drop_cell(ch, 0, !ch->cells[0].nconns);
	if (ch->lfd >= 0)
		close(ch->lfd);
	if (ch->pfd >= 0)
		close(ch->pfd);
	pthread_mutex_destroy(&ch->lock);
	free(ch->cells);
	free(ch);
}

void sc__chan_abandon(struct sc_chan *ch)
{
	for (int i = 0; i < ch->ncells; i++)
		if (ch->cells[i].rfd >= 0)
			close(ch->cells[i].rfd);
	if (ch->lfd >= 0)
		close(ch->lfd);
	if (ch->pfd >= 0)
		close(ch->pfd);
	free(ch->cells);
	free(ch);
}

static int chan_attach(struct sc_chan *ch, struct sc_conn *c, int x);

int sc__chan_attach(struct sc_chan *ch, struct sc_conn *c)
{
	return chan_attach(ch, c, -1);
}

int sc__chan_attachx(struct sc_chan *ch, struct sc_conn *c, int i)
{
	return chan_attach(ch, c, i);
}

int sc__chan_xindex(struct sc_conn *c, struct sc_chan *ch)
{
	for (int i = 0; i < SC_XCELLS; i++)
		if (atomic_load_explicit(&c->chanx[i], memory_order_relaxed) == ch)
			return i;
	return -1;
}

static int chan_attach(struct sc_chan *ch, struct sc_conn *c, int x)
{
	struct sc_group *g = c->g;
	struct sc_chan_cell *cc = NULL;
	bool new_cell = false;
	int rc = 0;

	pthread_mutex_lock(&ch->lock);
	for (int i = 0; i < ch->ncells; i++)
		if (ch->cells[i].g == g)
			cc = &ch->cells[i];
	if (!cc) {
		new_cell = true;
		if (ch->ncells == ch->cap) {
			int cap = ch->cap ? ch->cap * 2 : 4;
			void *p = realloc(ch->cells, cap * sizeof(*ch->cells));
			if (!p) {
				rc = -ENOMEM;
				goto out;
			}
			ch->cells = p;
			ch->cap = cap;
		}
		pthread_mutex_lock(&g->lock);
		rc = sc__group_cell_alloc(g, ch);
		pthread_mutex_unlock(&g->lock);
		if (rc < 0)
			goto out;
		cc = &ch->cells[ch->ncells++];
		cc->g = g;
		cc->idx = (uint32_t)rc;
		cc->nconns = 0;
		cc->rfd = -1;
		cc->retake = cc->clean = false;
		rc = ch->pfd >= 0 ? add_wake_socket(ch, cc) : 0;
		if (rc) {
			pthread_mutex_lock(&g->lock);
			sc__group_cell_free(g, cc->idx);
			pthread_mutex_unlock(&g->lock);
			ch->ncells--;
			goto out;
		}
	}
	if (cc->nconns == 0 && !new_cell) {
		/* an idle one taken up again */
		ch->nidle--;
		pthread_mutex_lock(&g->lock);
		sc__group_unhold(g);    /* (c is g's: it lives on) */
		pthread_mutex_unlock(&g->lock);
	}
	if (cc->nconns++ == 0) {
		/* a new cell is not armed: the channel is not quiet */
		epoch_move(ch);
		atomic_store_explicit(&ch->ncells_seen, ch->ncells, memory_order_relaxed);
	}
	/* release: the CELL message carrying our wake socket was sent before
	 * the peer can see this index, so a peer that finds the index unknown
	 * can drain the group socket and find it */
	if (x >= 0) {
		/* release: sc__conn_chan's acquire (for chanx, a reader
		 * under bindlock or sc__chan_xindex's relaxed look) */
		atomic_store_explicit(&c->chanx[x], ch, memory_order_release);
		atomic_store_explicit(&c->cellx[x], cc->idx, memory_order_release);
		atomic_store_explicit(&c->me->cellx[x], cc->idx, memory_order_release);
	} else {
		/* release: pairs with sc__conn_chan and sc__conn_cell */
		atomic_store_explicit(&c->chan, ch, memory_order_release);
		atomic_store_explicit(&c->cell, cc->idx, memory_order_release);
		atomic_store_explicit(&c->me->cell, cc->idx, memory_order_release);
	}
out:
	pthread_mutex_unlock(&ch->lock);
	return rc;
}

static void chan_detach(struct sc_chan *ch, struct sc_conn *c, int x);

void sc__chan_detach(struct sc_chan *ch, struct sc_conn *c)
{
	chan_detach(ch, c, -1);
}

void sc__chan_detachx(struct sc_chan *ch, struct sc_conn *c, int i)
{
	/* the peer stops waking it before the cell can be reused */
	atomic_store_explicit(&c->me->cellx[i], SC_CELL_NONE, memory_order_release);
	chan_detach(ch, c, i);
}

static void chan_detach(struct sc_chan *ch, struct sc_conn *c, int x)
{
	struct sc_group *g = c->g;

	pthread_mutex_lock(&ch->lock);
	for (int i = 0; i < ch->ncells; i++) {
		struct sc_chan_cell *cc = &ch->cells[i];
		if (cc->g != g)
			continue;
		/* a thread of ours blocked on c sleeps on this cell: wake it
		 * to re-arm wherever c is bound now.  On a channel with an fd
		 * every such sleeper is counted before it reads the sequence
		 * (sc__conn_wait): none counted, none to wake (a close's
		 * system call saved); one counted later read the sequence
		 * after this look, and a wake-up here would not have stopped
		 * its sleep either.  seq_cst: against its count. */
		struct sc_cell *cell = &g->my_cells[cc->idx];
		if (ch->pfd < 0 || atomic_load_explicit(&cell->futex_waiters, memory_order_seq_cst))
			sc__cell_futex_wake(cell);
		if (--cc->nconns == 0)
			cell_emptied(ch, i);
		break;
	}
	pthread_mutex_unlock(&ch->lock);
	if (x >= 0) {
		atomic_store_explicit(&c->chanx[x], NULL, memory_order_relaxed);
		atomic_store_explicit(&c->cellx[x], SC_CELL_NONE, memory_order_relaxed);
	} else {
		/* release: as in chan_attach (a reader that finds no
		 * channel attaches one under bindlock) */
		atomic_store_explicit(&c->chan, NULL, memory_order_release);
		atomic_store_explicit(&c->cell, SC_CELL_NONE, memory_order_release);
	}
}

/* A wake socket for cell cc: keep one end in our epoll set, hand the other
 * to the peer with CELL (ch->lock held). */
static int add_wake_socket(struct sc_chan *ch, struct sc_chan_cell *cc)
{
	struct sc_group *g = cc->g;
	int sv[2], rc;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	sv[0] = sc__fd_park(sv[0]);     /* (sv[1] goes to the peer, then closes) */
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = sv[0] };
	if (epoll_ctl(ch->pfd, EPOLL_CTL_ADD, sv[0], &ev) < 0) {
		rc = -errno;
		goto err;
	}
	pthread_mutex_lock(&g->lock);
	rc = sc__group_cell_send(g, cc->idx, sv[1]);
	pthread_mutex_unlock(&g->lock);
	if (rc)
		goto err;
	close(sv[1]);
	cc->rfd = sv[0];
	return 0;
err:
	close(sv[0]);
	close(sv[1]);
	return rc;
}

int sc__chan_ensure_pfd(struct sc_chan *ch)
{
	int rc = 0;

	pthread_mutex_lock(&ch->lock);
	if (ch->pfd >= 0)
		goto out;
	/* made aside, published once whole: a waker of ours reads lfd
	 * without ch->lock (wake_local), and must never see a number that
	 * failure here closed (another file's, by then) */
	int pfd = sc__fd_park(epoll_create1(EPOLL_CLOEXEC));
	int lfd = sc__fd_park(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
	if (pfd < 0 || lfd < 0 || epoll_ctl(pfd, EPOLL_CTL_ADD, lfd, &ev) < 0) {
		rc = -errno;
		if (pfd >= 0)
			close(pfd);
		if (lfd >= 0)
			close(lfd);
		goto out;
	}
	ch->pfd = pfd;
	/* release: see lfd_of */
	__atomic_store_n(&ch->lfd, lfd, __ATOMIC_RELEASE);
	for (int i = 0; i < ch->ncells && !rc; i++)
		rc = add_wake_socket(ch, &ch->cells[i]);
out:
	pthread_mutex_unlock(&ch->lock);
	return rc;
}

/* Reset the channel's pollable fd: empty every wake socket that has
 * something and the local eventfd.  Never blocks, whatever a peer did. */
static bool drain_known(struct sc_chan *ch, bool taken_only);

static void chan_drain(struct sc_chan *ch)
{
	/* a drain but the arming's own (rearm_all): tokens taken, so cells
	 * may be disarmed; moved first, so that a caller finding the channel
	 * quiet finds the signal still in its fd */
	epoch_move(ch);
	pthread_mutex_lock(&ch->lock);
	if (!drain_known(ch, false))
		drain_fd(ch);
	pthread_mutex_unlock(&ch->lock);
}

/* Empty a wake socket: its datagrams (a byte each) DRAIN_BATCH at a time,
 * in one call when there are fewer (a wake-up is one datagram: the
 * token); a hostile peer may keep it full: bounded. */
#define DRAIN_BATCH 16
static int drain_wake_socket(int fd)
{
	int got = 0, k;
	char buf[DRAIN_BATCH];
	struct iovec iov[DRAIN_BATCH];
	struct mmsghdr mm[DRAIN_BATCH];
	for (int i = 0; i < DRAIN_BATCH; i++) {
		iov[i] = (struct iovec){ &buf[i], 1 };
		mm[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
	}
	for (int i = 0; i < 4; i++) {
		if ((k = recvmmsg(fd, mm, DRAIN_BATCH, MSG_DONTWAIT, NULL)) > 0)
			got += k;
		if (k < DRAIN_BATCH)
			break;
	}
	return got;
}

static void drain_fd(struct sc_chan *ch)
{
	struct epoll_event ev[16];
	int n;

	while ((n = epoll_wait(ch->pfd, ev, 16, 0)) > 0) {
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			if (fd == lfd_of(ch)) {
				atomic_store_explicit(&ch->lsig, false, memory_order_seq_cst);
				sc__efd_drain(fd);
			}
			else
				drain_wake_socket(fd);
		}
		if (n < 16)
			break;
	}
}

/*
 * Drain what we know may signal the fd, a system call each, without asking
 * its epoll set which fds are readable (one call less per wake-up): the
 * wake sockets of cells whose token is not armed (a waker took it and
 * sends, or has sent, its datagram; taken_only: the cells rearm_all just
 * re-armed, marked in ch->retake) and the local eventfd if lsig says it
 * was signalled.  More than DRAIN_DIRECT cells: the epoll set's way.
 * Returns whether it drained anything.  A caller that found the fd
 * readable and drained nothing this way drains every fd the epoll set
 * finds readable, so that the fd is never left readable for ever by what
 * is not known: a datagram of a token taken before an earlier arming that
 * came after that arming's drain, one a hostile peer sent unasked, a
 * local signal racing its flag.  ch->lock held: a cell's fd is closed
 * under it.
 */
#define DRAIN_DIRECT 4
static bool drain_known(struct sc_chan *ch, bool taken_only)
{
	int fds[DRAIN_DIRECT], k = 0;
	struct sc_chan_cell *cells[DRAIN_DIRECT];
	bool many = false;

	for (int i = 0; i < ch->ncells; i++) {
		struct sc_chan_cell *cc = &ch->cells[i];
		bool mine = taken_only ? cc->retake :
			    atomic_load_explicit(&cc->g->my_cells[cc->idx].armed,
						 memory_order_relaxed) != SC_ARM_POLL;
		cc->retake = false;
		if (!mine || cc->rfd < 0 || many)
			continue;
		if (k == DRAIN_DIRECT)
			many = true;
		else
			cells[k] = cc, fds[k++] = cc->rfd;
	}
	/* the flag first: a signal after it is in the fd (or in the flag
	 * again, for the next drain) */
	bool local = lfd_of(ch) >= 0 && atomic_exchange_explicit(&ch->lsig, false, memory_order_acq_rel);
	if (many) {
		drain_fd(ch);
		return true;
	}
	bool got = false;
	for (int i = 0; i < k; i++)
		if (drain_wake_socket(fds[i]) > 0) {
			/* the datagram of the taking is read: the re-arming
			 * has nothing to drain (a later one, should it come,
			 * is a wake-up for nothing and drained then) */
			cells[i]->clean = !taken_only;
			got = true;
		}
	if (local)
		got |= sc__efd_drain(lfd_of(ch));
	return got;
}

/* Wake our own channel (local eventfd, never shared), if it has one. */
static void wake_local(struct sc_chan *ch)
{
	int lfd = lfd_of(ch);

	if (lfd < 0)
		return;
	/* seq_cst: the flag before the signal (drain_known) */
	atomic_store_explicit(&ch->lsig, true, memory_order_seq_cst);
	sc__efd_wake(lfd);
}

void sc__chan_signal(struct sc_chan *ch)
{
	wake_local(ch);
}

void sc__chan_unsignal(struct sc_chan *ch)
{
	if (lfd_of(ch) >= 0) {
		atomic_store_explicit(&ch->lsig, false, memory_order_seq_cst);
		sc__efd_drain(lfd_of(ch));
	}
}

uint32_t sc__chan_arm_conn(struct sc_conn *c, uint32_t mode)
{
	struct sc_cell *cell = &c->g->my_cells[sc__conn_cell(c)];
	/* before arming: any wake-up from now on changes it */
	uint32_t seq = atomic_load_explicit(&cell->wake_seq, memory_order_acquire);

	atomic_store_explicit(&cell->armed, mode, memory_order_relaxed);
	/* a futex token: a waker will not signal the channel's fd (stored
	 * after the token: see sc_chan_wait) */
	if (mode != SC_ARM_POLL)
		epoch_move(sc__conn_chan(c));
	/* the armed flag (and the caller's rx_armed/tx_blocked store) must be
	 * visible before we re-check the ring; pairs with set_ready's fence */
	atomic_thread_fence(memory_order_seq_cst);
	return seq;
}

int sc__conn_sleep(struct sc_cell *cell, uint32_t seq, uint64_t deadline_ns)
{
	_Atomic uint32_t *w = &cell->wake_seq;
	struct timespec ts, *tp = NULL;

	if (deadline_ns != UINT64_MAX) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		uint64_t n = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
		if (n >= deadline_ns)
			return -ETIMEDOUT;
		ts.tv_sec = (time_t)((deadline_ns - n) / 1000000000u);
		ts.tv_nsec = (long)((deadline_ns - n) % 1000000000u);
		tp = &ts;
	}
	/* returns at once if a wake-up came since seq was read */
	if (SC_SYSCALL(SYS_futex, w, FUTEX_WAIT, seq, tp, NULL, 0) < 0) {
		if (errno == ETIMEDOUT || errno == EINTR)
			return -errno;
		if (errno != EAGAIN)
			return -errno;
	}
	SC_STAT_ADD(sleeps, 1);
	return 0;
}

void sc__chan_rearm_poll(struct sc_conn *c)
{
	struct sc_chan *ch = sc__conn_chan(c);
	_Atomic uint32_t *w;

	/* a shared channel's fd speaks for all its connections: only
	 * sc_chan_wait may reset it */
	if (!ch || ch->pfd < 0 || !ch->private_)
		return;
	w = &c->g->my_cells[sc__conn_cell(c)].armed;
	/* flag still set: nobody signalled the fd since it was armed */
	if (atomic_load_explicit(w, memory_order_relaxed) == SC_ARM_POLL)
		return;
	chan_drain(ch);
	atomic_store_explicit(w, SC_ARM_POLL, memory_order_relaxed);
}

int sc__chan_sleep(struct sc_chan *ch, int timeout_ms)
{
	struct pollfd p = { .fd = ch->pfd, .events = POLLIN };
	int n = poll(&p, 1, timeout_ms);

	if (n < 0)
		return -errno;
	if (n == 0)
		return -ETIMEDOUT;
	/* consume the signals; another wake-up after this re-arms it */
	chan_drain(ch);
	SC_STAT_ADD(sleeps, 1);
	return 0;
}

/* ---- public channel API ------------------------------------------------ */


SC_API int sc_chan_open(struct sc_chan **out)
{
	int saved = errno;
	int rc = sc__chan_new(false, out);

	errno = saved;
	return rc;
}

SC_API int sc_chan_fd(const struct sc_chan *ch)
{
	return ch->pfd;
}

SC_API int sc_chan_bind(struct sc_conn *c, struct sc_chan *ch)
{
	return sc__chan_bind(c, ch, false);
}

int sc__chan_bind(struct sc_conn *c, struct sc_chan *ch, bool quiet)
{
	int saved = errno, rc = 0;

	pthread_mutex_lock(&c->bindlock);
	if (!ch) {
		if (!c->own && (rc = sc__chan_new(true, &c->own)))
			goto out;
		ch = c->own;
	}
	if (sc__conn_chan(c) == ch)
		goto out;
	if (sc__conn_chan(c))
		sc__chan_detach(sc__conn_chan(c), c);
	rc = sc__chan_attach(ch, c);
	if (rc)
		goto out;
	pthread_mutex_unlock(&c->bindlock);
	/* report the connection's next change of state, and its present one
	 * if it already has something to report (no bindlock here: the
	 * send/receive paths take bindlock inside their own locks) */
	/* seq_cst: our flag before sc_conn_events' look at the ring; the
	 * producer's publish before its load of rx_armed (Dekker's pattern) */
	atomic_fetch_or_explicit(&c->rx.h->rx_armed, SC_ARM_EDGE, memory_order_seq_cst);
	if (!quiet && (sc_conn_events(c) & (SC_EV_IN | SC_EV_ERR | SC_EV_HUP | SC_EV_RDHUP))) {
		pthread_mutex_lock(&c->g->lock);
		sc__notify_self(c);
		pthread_mutex_unlock(&c->g->lock);
	}
	errno = saved;
	return 0;
out:
	pthread_mutex_unlock(&c->bindlock);
	errno = saved;
	return rc;
}

SC_API void sc_chan_close(struct sc_chan *ch)
{
	int saved = errno;

	/* move every bound connection back to its own channel */
	for (;;) {
		struct sc_conn *found = NULL;
		pthread_mutex_lock(&ch->lock);
		for (int i = 0; i < ch->ncells && !found; i++) {
			struct sc_group *g = ch->cells[i].g;
			pthread_mutex_lock(&g->lock);
			for (uint32_t s = 0; s < g->nslots && !found; s++)
				if (g->conns[s] && sc__conn_chan(g->conns[s]) == ch)
					found = g->conns[s];
			pthread_mutex_unlock(&g->lock);
		}
		pthread_mutex_unlock(&ch->lock);
		if (!found)
			break;
		if (sc_chan_bind(found, NULL)) {
			/* no fd for its own channel: leave it unbound */
			pthread_mutex_lock(&found->bindlock);
			if (sc__conn_chan(found) == ch)
				sc__chan_detach(ch, found);
			pthread_mutex_unlock(&found->bindlock);
		}
	}
	/* and every connection it watches as their second channel */
	for (;;) {
		struct sc_conn *found = NULL;
		pthread_mutex_lock(&ch->lock);
		for (int i = 0; i < ch->ncells && !found; i++) {
			struct sc_group *g = ch->cells[i].g;
			pthread_mutex_lock(&g->lock);
			for (uint32_t s = 0; s < g->nslots && !found; s++)
				if (g->conns[s] && sc__chan_xindex(g->conns[s], ch) >= 0)
					found = g->conns[s];
			pthread_mutex_unlock(&g->lock);
		}
		pthread_mutex_unlock(&ch->lock);
		if (!found)
			break;
		pthread_mutex_lock(&found->bindlock);
		int x = sc__chan_xindex(found, ch);
		if (x >= 0)
			sc__chan_detachx(ch, found, x);
		pthread_mutex_unlock(&found->bindlock);
	}
	sc__chan_free(ch);
	errno = saved;
}

/* Take the ready bits of one cell and translate them to connections of ch;
 * bits beyond room are put back for the next call. */
static int take_cell(struct sc_chan *ch, struct sc_chan_cell *cc, struct sc_conn **out, int n)
{
	struct sc_group *g = cc->g;
	struct sc_cell *cell = &g->my_cells[cc->idx];
	int k = 0;

	for (int w = 0; w < 4; w++) {
		if (!atomic_load_explicit(&cell->ready[w], memory_order_relaxed))
			continue;
		/* acquire: the state change that set the bit is visible */
		uint64_t bits = atomic_exchange_explicit(&cell->ready[w], 0, memory_order_acquire);
		pthread_mutex_lock(&g->lock);
		while (bits) {
			int b = __builtin_ctzll(bits);
			uint32_t slot = (uint32_t)(w * 64 + b);
			if (k == n) {
				atomic_fetch_or_explicit(&cell->ready[w], bits, memory_order_relaxed);
				break;
			}
			bits &= bits - 1;
			/* a hostile peer may set any bit: keep only ours */
			if (slot < g->nslots && g->conns[slot] &&
			    (sc__conn_chan(g->conns[slot]) == ch ||
			     sc__chan_xindex(g->conns[slot], ch) >= 0))
				out[k++] = g->conns[slot];
		}
		pthread_mutex_unlock(&g->lock);
	}
	return k;
}

static int collect(struct sc_chan *ch, struct sc_conn **out, int n)
{
	int k = 0;

	pthread_mutex_lock(&ch->lock);
	for (int i = 0; i < ch->ncells && k < n; i++)
		k += take_cell(ch, &ch->cells[i], out + k, n - k);
	pthread_mutex_unlock(&ch->lock);
	return k;
}

int sc__chan_collect(struct sc_chan *ch, struct sc_conn **out, int n)
{
	int k = 0, got;

	while (k < n && (got = collect(ch, out + k, n - k)) > 0)
		k += got;
	return k;
}

/* Reset the fd if a waker used a token since the last arming, then
 * arm every cell.  Cells stay armed while nobody collects, so a program
 * that polls sc_chan_fd itself is signalled for the next event. */
static void rearm_all(struct sc_chan *ch)
{
	bool taken = false;

	pthread_mutex_lock(&ch->lock);
	sweep_idle(ch);
	for (int i = 0; i < ch->ncells; i++) {
		_Atomic uint32_t *a = &ch->cells[i].g->my_cells[ch->cells[i].idx].armed;
		if (atomic_load_explicit(a, memory_order_relaxed) != SC_ARM_POLL) {
			/* (a cell whose datagram a reset read: nothing to drain) */
			if (!ch->cells[i].clean) {
				taken = true;
				ch->cells[i].retake = true;
			}
			ch->cells[i].clean = false;
			atomic_store_explicit(a, SC_ARM_POLL, memory_order_relaxed);
		}
	}
	/* a token taken means the fd may be signalled: reset it (those cells'
	 * sockets, and the local eventfd if signalled); a wake-up after our
	 * re-arming signals it again (the arming's own drain: the channel
	 * stays quiet if nothing is found after it) */
	if (taken)
		drain_known(ch, true);
	pthread_mutex_unlock(&ch->lock);
	/* armed before the scan; pairs with set_ready's fence */
	atomic_thread_fence(memory_order_seq_cst);
}

void sc__chan_arm_keep(struct sc_chan *ch)
{
	epoch_move(ch);        /* the fd is not reset */
	pthread_mutex_lock(&ch->lock);
	for (int i = 0; i < ch->ncells; i++) {
		ch->cells[i].clean = false;
		atomic_store_explicit(&ch->cells[i].g->my_cells[ch->cells[i].idx].armed,
				      SC_ARM_POLL, memory_order_relaxed);
	}
	pthread_mutex_unlock(&ch->lock);
	atomic_thread_fence(memory_order_seq_cst);
}

void sc__chan_reset(struct sc_chan *ch)
{
	int saved = errno;

	if (ch->pfd >= 0)
		chan_drain(ch);
	errno = saved;
}

bool sc__chan_quiet(struct sc_chan *ch)
{
	/* seq_cst: as epoch_move */
	return atomic_load_explicit(&ch->quiet_at, memory_order_seq_cst) ==
	       atomic_load_explicit(&ch->epoch, memory_order_seq_cst);
}

int sc__chan_cells(struct sc_chan *ch)
{
	return atomic_load_explicit(&ch->ncells_seen, memory_order_relaxed);
}

bool sc__chan_readable(struct sc_chan *ch)
{
	struct pollfd p = { .fd = ch->pfd, .events = POLLIN };
	int saved = errno;
	bool r = ch->pfd >= 0 && poll(&p, 1, 0) > 0;

	errno = saved;
	return r;
}

/* out[0..k) without the repeats of a later pass (those of out[first..k)
 * already in front of them): a connection that changed again between two
 * passes (another thread's event, the link's death seen by the control
 * thread) is reported once a call.  Rare: a pass after the first almost
 * always finds nothing.  The passes themselves run as they would have
 * (each pass that finds anything, repeats too, is followed by another:
 * the last one, finding nothing, leaves the cells armed).  Returns the
 * new count. */
static int drop_repeats(struct sc_conn **out, int first, int k)
{
	int kept = first;

	for (int i = first; i < k; i++) {
		int j = 0;
		while (j < kept && out[j] != out[i])
			j++;
		if (j == kept)
			out[kept++] = out[i];
	}
	return kept;
}

SC_API int sc_chan_wait(struct sc_chan *ch, struct sc_conn **out, int n, int timeout_ms)
{
	int saved = errno, k, rc = 0;
	struct timespec t0;

	if (n <= 0)
		return -EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		/* re-arm and collect until a pass finds nothing: a waker may
		 * take a token between our re-arming and our drain, and its
		 * datagram goes with the drain; its ready bit is in the next
		 * collect, and the cells must be left armed (a caller that then
		 * sleeps on our fd, or polls it, is signalled for what follows).
		 * A full out[] returns early: the caller calls again. */
		int first = 0;
		k = 0;
		for (;;) {
			/* read before arming: whatever may disarm a cell after
			 * that moves it (a token armed for a futex sleep stores
			 * the token first) */
			/* seq_cst: the other side of epoch_move */
			uint32_t e0 = atomic_load_explicit(&ch->epoch, memory_order_seq_cst);
			rearm_all(ch);
			int got = collect(ch, out + k, n - k);
			k += got;
			if (!first)
				first = k;
			if (got == 0) {
				/* seq_cst: read by sc__chan_quiet */
				atomic_store_explicit(&ch->quiet_at, e0, memory_order_seq_cst);
				/* (not before: the passes end as they would) */
				k = drop_repeats(out, first, k);
				break;
			}
			if (k == n)
				break;
		}
		if (k || timeout_ms == 0)
			break;
		int left = -1;
		if (timeout_ms > 0) {
			struct timespec t;
			clock_gettime(CLOCK_MONOTONIC, &t);
			long el = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
			if (el >= timeout_ms)
				break;
			left = timeout_ms - (int)el;
		}
		rc = sc__chan_sleep(ch, left);
		if (rc == -ETIMEDOUT) {
			rc = 0;
			break;
		}
		if (rc && rc != -EINTR)
			break;
		rc = 0;
	}
	errno = saved;
	return k ? k : rc;
}
