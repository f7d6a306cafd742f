/* SPDX-License-Identifier: MIT */
/*
 * A channel's fd is reset by reading what is known to signal it (the wake
 * sockets of cells whose token a waker took, the local eventfd when its
 * flag says so), not by asking its epoll set; and a cell whose datagram a
 * reset read is re-armed without another drain.  What is not known must
 * never leave the fd readable for ever: a datagram a peer sends without
 * taking a token, and one sent late for a token taken before an arming.
 * Each step here leaves the fd as the kernel says it must be (poll), and
 * the re-armed token still wakes.  The victim and its peer step in turn
 * over pipes: no sleeps.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "layout.h"
#include "link.h"
#include "notify.h"
#include "t_util.h"

static char path[T_PATH_MAX];
static int to_peer[2], to_victim[2];

static void sig(int fd, char v) { t_write_full(fd, &v, 1); }
static char wt(int fd) { char b; t_read_full(fd, &b, 1); return b; }

static bool readable(int fd)
{
	return t_poll_in(fd, 0) > 0;
}

/* The fd readable (waiting for it), reset, and readable no more. */
static void reset_clears(struct sc_chan *ch, int fd, const char *what)
{
	T_ASSERTF(t_poll_in(fd, 10000) > 0, "%s: the channel's fd was never signalled", what);
	sc__chan_reset(ch);
	T_ASSERTF(!readable(fd), "%s: the fd stays readable after a reset", what);
}

static uint32_t token(struct sc_conn *c)
{
	return atomic_load(&c->g->my_cells[sc__conn_cell(c)].armed);
}

static int victim(void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c, *r[1];
	struct sc_chan *ch;
	char b[8];

	alarm(30);
	T_OK(sc_listen(path, 0, &l));
	T_OK(sc_accept(l, &c, 0));
	T_OK(sc_chan_open(&ch));
	T_OK(sc_chan_bind(c, ch));
	int fd = sc_chan_fd(ch);
	T_ASSERT(fd >= 0);
	T_ASSERT(sc_chan_wait(ch, r, 1, 0) >= 0);        /* armed */

	/* a local signal: the flag says the eventfd has it */
	sc__chan_signal(ch);
	reset_clears(ch, fd, "a local signal");

	/* a waker's token and its datagram */
	sig(to_peer[1], 1);
	reset_clears(ch, fd, "a waker's datagram");
	T_ASSERT(sc_chan_wait(ch, r, 1, 0) == 1 && r[0] == c);
	T_ASSERT(sc_recv(c, b, sizeof(b), SC_NONBLOCK) == 1 && b[0] == 'a');
	/* (as a program reads: to EAGAIN, which asks for the next wake-up) */
	T_ASSERT(sc_recv(c, b, sizeof(b), SC_NONBLOCK) == -EAGAIN);
	/* re-armed without a drain (the reset read the datagram), and the
	 * fd not readable */
	T_ASSERT(token(c) == SC_ARM_POLL);
	T_ASSERT(!readable(fd));

	/* a datagram the peer sends unasked: no token taken */
	sig(to_peer[1], 2);
	reset_clears(ch, fd, "an unasked datagram");

	/* the token taken, the arming, then the datagram (late) */
	sig(to_peer[1], 3);
	wt(to_victim[0]);                       /* the peer took the token */
	T_ASSERT(token(c) == 0);
	T_ASSERT(sc_chan_wait(ch, r, 1, 0) >= 0);        /* re-armed */
	T_ASSERT(token(c) == SC_ARM_POLL);
	sig(to_peer[1], 4);
	reset_clears(ch, fd, "a late datagram");

	/* the re-armed token still wakes */
	sig(to_peer[1], 5);
	T_ASSERTF(t_poll_in(fd, 10000) > 0, "%s", "the last send woke nobody");
	T_ASSERT(sc_chan_wait(ch, r, 1, 0) == 1 && r[0] == c);
	T_ASSERT(sc_recv(c, b, sizeof(b), SC_NONBLOCK) == 1 && b[0] == 'b');
	sig(to_peer[1], 6);
	sc_close(c);
	sc_chan_close(ch);
	sc_listener_close(l);
	return 0;
}

static int peer(void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	char one = 1;

	T_ASSERT(wt(to_peer[0]) == 1);
	t_send_all(c, "a", 1);
	uint32_t idx = atomic_load(&c->peer->cell);
	_Atomic uint32_t *armed = &c->g->peer_cells[idx].armed;
	int ws = sc__group_peer_wake(c->g, idx, atomic_load(&c->g->peer_cells[idx].wake_gen));
	T_ASSERT(ws >= 0);

	T_ASSERT(wt(to_peer[0]) == 2);
	T_ASSERT(atomic_load(armed) == SC_ARM_POLL);
	T_ASSERT(send(ws, &one, 1, MSG_DONTWAIT) == 1);

	T_ASSERT(wt(to_peer[0]) == 3);
	uint32_t v = SC_ARM_POLL;
	T_ASSERT(atomic_compare_exchange_strong(armed, &v, 0));
	sig(to_victim[1], 1);
	T_ASSERT(wt(to_peer[0]) == 4);
	T_ASSERT(send(ws, &one, 1, MSG_DONTWAIT) == 1);

	T_ASSERT(wt(to_peer[0]) == 5);
	t_send_all(c, "b", 1);
	T_ASSERT(wt(to_peer[0]) == 6);
	sc_close(c);
	return 0;
}

T_TEST(drain_known)
{
	T_OK(pipe(to_peer));
	T_OK(pipe(to_victim));
	t_listen_path(path);
	t_log("a reset reads what is known, and what is not never leaves the fd readable");
	pid_t v = t_fork(victim, NULL);
	pid_t p = t_fork(peer, NULL);
	t_wait_ok(v);
	t_wait_ok(p);
}

T_MAIN(NULL, T_ENTRY(drain_known))
