/* SPDX-License-Identifier: MIT */
/*
 * Nonblocking operation and readiness (rings of 64 KiB via SHORTCUT_RMEM /
 * SHORTCUT_WMEM):
 *  - sc_accept(SC_NONBLOCK) with nobody connecting -> -EAGAIN; poll on
 *    sc_listener_fd wakes when a client connects;
 *  - nonblocking sends fill exactly one ring, then -EAGAIN; poll on
 *    sc_conn_fd wakes once the peer drained it, and sending works again;
 *  - nonblocking recv on an empty ring -> -EAGAIN; poll on sc_conn_fd wakes
 *    within 1 s of the peer's send, and recv gets the data;
 *  - SC_NONBLOCK at sc_connect and sc_set_nonblock make plain calls
 *    nonblocking; sc_conn_events reports SC_EV_IN / SC_EV_OUT.
 * Steps are sequenced through two pipes between the processes.  The wake-up
 * time is counted from the client's send (it passes its clock reading),
 * not from when the server told it to send; "the client sits in poll()"
 * is the state of its thread (it passes its pid), not a fixed sleep.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t_util.h"

#define RING 65536u
#define SEED_FILL 0xf111u
#define SEED_MSG 0x3e55u
#define WAKE_LIMIT_MS 1000

static int to_client[2], to_server[2];   /* pipes */
static pid_t client_pid;                 /* in the server */

static void put(int fd, uint64_t v) { t_write_full(fd, &v, sizeof v); }
static uint64_t get(int fd) { uint64_t v; t_read_full(fd, &v, sizeof v); return v; }

static int server(const char *path, void *arg)
{
	struct sc_listener *l = NULL;
	struct sc_conn *c = NULL, *c2 = NULL;
	struct sc_conn_info info;
	uint64_t fill, t0, waited;
	char *buf = malloc(RING * 2);
	ssize_t r;
	int lfd, ev;

	T_ASSERT(buf != NULL);
	close(to_client[0]);
	close(to_server[1]);
	client_pid = (pid_t)get(to_server[0]);
	T_OK(sc_listen(path, 0, &l));
	lfd = sc_listener_fd(l);
	T_ASSERT(lfd >= 0);

	/* 1. accept: nothing pending */
	t_log("nonblock: sc_accept(SC_NONBLOCK) with no client -> -EAGAIN; "
	      "poll(sc_listener_fd) wakes on connect");
	T_EQ(sc_accept(l, &c, SC_NONBLOCK), -EAGAIN);
	T_EQ(t_poll_in(lfd, 0), 0);
	put(to_client[1], 1);                /* "connect now" */
	t0 = t_now_ms();
	T_ASSERTF(t_poll_in(lfd, 5000) & POLLIN, "listener fd not readable %llu ms "
		  "after the client was told to connect", (unsigned long long)(t_now_ms() - t0));
	T_OK(sc_accept(l, &c, SC_NONBLOCK));
	T_ASSERT(c != NULL);
	T_EQ(sc_accept(l, &c2, SC_NONBLOCK), -EAGAIN);
	T_EQ(sc_conn_info(c, &info), 0);
	T_EQ(info.rx_ring_size, RING);
	T_EQ(info.tx_ring_size, RING);
	ev = sc_conn_events(c);
	T_ASSERTF((ev & (SC_EV_IN | SC_EV_OUT | SC_EV_ERR | SC_EV_HUP)) == SC_EV_OUT,
		  "fresh connection events 0x%x, want SC_EV_OUT only", ev);
	/* accepted with SC_NONBLOCK: the connection is nonblocking by default */
	T_EQ(sc_recv(c, buf, 1, 0), -EAGAIN);
	sc_set_nonblock(c, 0);
	put(to_client[1], 10);               /* "fill the ring now" */

	/* 2. the client fills our ring; we drain it after it says so */
	fill = get(to_server[0]);
	T_EQ(fill, RING);
	ev = sc_conn_events(c);
	T_ASSERTF(ev & SC_EV_IN, "events 0x%x with a full receive ring", ev);
	/* the client sits in poll() */
	t_wait_asleep(client_pid, client_pid, 10000, "nonblock: the client");
	for (uint64_t off = 0; off < fill;) {
		size_t n = fill - off < 5000 ? (size_t)(fill - off) : 5000;

		r = sc_recv(c, buf, n, SC_NONBLOCK);
		T_ASSERTF(r > 0, "nonblocking recv of a full ring at %llu returned %zd%s",
			  (unsigned long long)off, r, t_errname_(r));
		T_PAT_CHECK(SEED_FILL, off, buf, (size_t)r);
		off += (uint64_t)r;
	}
	/* no EAGAIN check here: the client is woken as soon as we publish
	 * freed space and may already be sending again */
	/* the client sends 1000 more after its wake-up */
	t_recv_all(c, buf, 1000);
	T_PAT_CHECK(SEED_FILL, fill, buf, 1000);

	/* 3. empty ring: recv -> -EAGAIN, then poll wakes on the client's send */
	t_log("nonblock: recv on an empty ring -> -EAGAIN; poll(sc_conn_fd) wakes "
	      "within %d ms of the peer's send", WAKE_LIMIT_MS);
	T_EQ(sc_recv(c, buf, 100, SC_NONBLOCK), -EAGAIN);
	T_EQ(sc_recv(c, buf, 100, SC_NONBLOCK | SC_PEEK), -EAGAIN);
	T_ASSERT(!(sc_conn_events(c) & SC_EV_IN));
	sc_set_nonblock(c, 1);
	T_EQ(sc_recv(c, buf, 100, 0), -EAGAIN);
	sc_set_nonblock(c, 0);
	put(to_client[1], 2);                /* "send now" */
	t_wait_events(c, SC_EV_IN, 10000, "server waiting for data");
	t0 = t_now_ms();
	{
		uint64_t sent_at = get(to_server[0]);   /* the client's clock at its send */

		waited = t0 > sent_at ? t0 - sent_at : 0;
	}
	t_log("nonblock:   woke %llu ms after the client's send", (unsigned long long)waited);
	T_ASSERTF(waited <= WAKE_LIMIT_MS, "wake-up took %llu ms", (unsigned long long)waited);
	r = sc_recv(c, buf, 1000, SC_NONBLOCK);
	T_EQ(r, 333);
	T_PAT_CHECK(SEED_MSG, 0, buf, 333);
	T_EQ(sc_recv(c, buf, 1000, SC_NONBLOCK), -EAGAIN);

	/* 4. the client connected with SC_NONBLOCK: its plain recv is -EAGAIN
	 * until we send */
	T_EQ(get(to_server[0]), 3);
	t_send_all(c, "ping", 4);

	/* end: the client shuts down; we see EOF */
	T_EQ(sc_recv(c, buf, 10, 0), 0);
	T_EQ(sc_close(c), 0);
	sc_listener_close(l);
	free(buf);
	return 0;
}

static int client(const char *path, void *arg)
{
	struct sc_conn *c;
	struct sc_conn_info info;
	char *buf = malloc(RING * 2);
	uint64_t fill = 0, waited;
	ssize_t r;
	int ev;

	T_ASSERT(buf != NULL);
	close(to_client[1]);
	close(to_server[0]);
	put(to_server[1], (uint64_t)getpid());
	T_EQ(get(to_client[0]), 1);
	c = t_connect_retry(path, SC_NONBLOCK, 5000);
	T_EQ(sc_conn_info(c, &info), 0);
	T_EQ(info.tx_ring_size, RING);
	T_EQ(info.rx_ring_size, RING);
	T_EQ(get(to_client[0]), 10);

	/* 2. fill the ring */
	t_log("nonblock: nonblocking sends fill the %u-byte ring, then -EAGAIN; "
	      "poll(sc_conn_fd) wakes after the peer drains it", RING);
	ev = sc_conn_events(c);
	T_ASSERTF(ev & SC_EV_OUT, "events 0x%x on an empty ring", ev);
	{
		struct t_rng rng;

		t_rng_seed(&rng, 7);
		for (;;) {
			size_t n = (size_t)t_rng_range(&rng, 1, 9000);

			t_pat_fill(SEED_FILL, fill, buf, n);
			r = sc_send(c, buf, n, SC_NONBLOCK);
			if (r == -EAGAIN)
				break;
			T_ASSERTF(r > 0 && (size_t)r <= n, "nonblocking send(%zu) after %llu "
				  "bytes returned %zd%s", n, (unsigned long long)fill, r,
				  t_errname_(r));
			fill += (uint64_t)r;
			T_ASSERTF(fill <= RING, "%llu bytes went into a %u-byte ring that "
				  "nobody reads", (unsigned long long)fill, RING);
		}
	}
	T_EQ(fill, RING);
	/* the connection default is nonblocking (SC_NONBLOCK at connect) */
	T_EQ(sc_send(c, buf, 1, 0), -EAGAIN);
	{
		struct iovec iov[2] = { { buf, 1 }, { buf + 1, 1 } };

		T_EQ(sc_sendv(c, iov, 2, 0), -EAGAIN);
	}
	ev = sc_conn_events(c);
	T_ASSERTF(!(ev & SC_EV_OUT), "events 0x%x with a full send ring", ev);
	put(to_server[1], fill);
	waited = t_wait_events(c, SC_EV_OUT, 10000, "client waiting for space");
	t_log("nonblock:   space after %llu ms (the peer waits until we sleep)",
	      (unsigned long long)waited);
	t_pat_fill(SEED_FILL, fill, buf, 1000);
	T_EQ(sc_send(c, buf, 1000, SC_NONBLOCK), 1000);

	/* 3. the server waits for our send */
	T_EQ(get(to_client[0]), 2);
	t_pat_fill(SEED_MSG, 0, buf, 333);
	{
		uint64_t t = t_now_ms();

		T_EQ(sc_send(c, buf, 333, 0), 333);
		put(to_server[1], t);
	}

	/* 4. our plain recv is nonblocking */
	t_log("nonblock: SC_NONBLOCK at sc_connect -> plain recv -EAGAIN until data");
	T_EQ(sc_recv(c, buf, 10, 0), -EAGAIN);
	put(to_server[1], 3);
	t_wait_events(c, SC_EV_IN, 5000, "client waiting for ping");
	T_EQ(sc_recv(c, buf, 10, 0), 4);
	T_ASSERT(memcmp(buf, "ping", 4) == 0);
	T_EQ(sc_recv(c, buf, 10, 0), -EAGAIN);
	sc_set_nonblock(c, 0);
	T_EQ(sc_shutdown(c, SHUT_WR), 0);
	/* the server closes once it sees our end of stream */
	T_EQ(sc_recv(c, buf, 10, 0), 0);
	T_EQ(sc_close(c), 0);
	free(buf);
	return 0;
}

/* the steps above, on one pair of processes */
T_TEST(readiness)
{
	t_run_pair_64k(to_client, to_server, server, client);
}

T_MAIN(NULL, T_ENTRY(readiness))
