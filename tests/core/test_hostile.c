/* SPDX-License-Identifier: MIT */
/*
 * A hostile peer: it scribbles cursors, flags and cell indices in the shared
 * segment and sends malformed control messages.  The victim must fail only
 * the connections concerned (EPROTO, counted), never crash, and keep serving
 * its other connections.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"
#include "link.h"
#include "t_util.h"

#define NCONN 5
static int go[2], done_[2], ready[2];

/* Send a control message with one fd, as a peer of ours would. */
static ssize_t send_msg_fd(int sock, const struct sc_msg *m, int fd)
{
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } u;
	struct iovec iov = { (void *)m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.b, .msg_controllen = sizeof(u.b) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &mh, 0);
}

static void signal_(int fd) { char b = 1; t_write_full(fd, &b, 1); }
static void await_(int fd) { char b; t_read_full(fd, &b, 1); }

static int client(const char *path, void *arg)
{
	struct sc_conn *c[NCONN];
	char buf[16] = "ping";

	for (int i = 0; i < NCONN; i++) {
		c[i] = t_connect_retry(path, 0, 5000);
		t_send_all(c[i], buf, 4);
	}
	await_(ready[0]);       /* the server read every ping */
	/* conn 0: producer cursor beyond anything the ring can hold */
	atomic_store(&c[0]->tx.h->prod, (uint64_t)1 << 40);
	/* conn 1: flags with bits that do not exist */
	atomic_store(&c[1]->me->flags, 0xffffffffu);
	/* conn 2: consumer cursor of the server's send ring moved far ahead */
	atomic_store(&c[2]->rx.h->cons, (uint64_t)1 << 50);
	/* conn 3: ask for a wake-up through a cell index out of range */
	atomic_store(&c[3]->me->cell, 5000u);
	atomic_store(&c[3]->rx.h->rx_armed, 1u);
	/* conn 4 stays honest */
	signal_(go[1]);
	await_(done_[0]);
	t_recv_all(c[4], buf, 4);
	T_ASSERT(!memcmp(buf, "pong", 4));
	for (int i = 0; i < NCONN; i++)
		sc_close(c[i]);
	return 0;
}

static int server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c[NCONN];
	char buf[1 << 16];
	struct sc_stats st;

	T_OK(sc_listen(path, 0, &l));
	for (int i = 0; i < NCONN; i++) {
		T_OK(sc_accept(l, &c[i], 0));
		t_recv_all(c[i], buf, 4);
	}
	signal_(ready[1]);
	await_(go[0]);

	t_log("producer cursor out of range -> EPROTO on that connection");
	T_EQ(sc_recv(c[0], buf, 16, 0), -EPROTO);
	T_EQ(sc_send(c[0], buf, 16, 0), -EPROTO);

	t_log("garbage flags -> EPROTO");
	T_EQ(sc_recv(c[1], buf, 16, 0), -EPROTO);

	t_log("consumer cursor beyond the producer -> EPROTO once the sender needs space");
	ssize_t r;
	size_t sent = 0;
	memset(buf, 'x', sizeof(buf));
	while ((r = sc_send(c[2], buf, sizeof(buf), SC_NONBLOCK)) > 0)
		sent += (size_t)r;
	T_EQ(r, -EPROTO);
	T_ASSERT(sent <= c[2]->tx.size);

	t_log("cell index out of range -> EPROTO when a wake-up is due");
	r = sc_send(c[3], "data", 4, 0);
	T_ASSERT(r == 4 || r == -EPROTO);
	T_EQ(sc_send(c[3], "data", 4, 0), -EPROTO);

	t_log("the honest connection in the same link group still works");
	T_EQ(sc_send(c[4], "pong", 4, 0), 4);
	sc_stats_get(&st);
	T_ASSERT(st.proto_errors >= 4);
	signal_(done_[1]);
	for (int i = 0; i < NCONN; i++)
		sc_close(c[i]);
	sc_listener_close(l);
	return 0;
}

/* A raw peer that hands over a memfd it could still shrink: refused. */
static int raw_unsealed(const char *path, void *arg)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	uint32_t ring[2] = { SC_RING_MIN, SC_RING_MIN };
	uint64_t so, d, size;

	memcpy(sa.sun_path + 1, path + 1, strlen(path) - 1);
	/* the listener may not be there yet */
	for (int i = 0; connect(s, (struct sockaddr *)&sa,
				offsetof(struct sockaddr_un, sun_path) + strlen(path)); i++) {
		T_ASSERT(errno == ECONNREFUSED && i < 5000);
		t_sleep_ms(1);
	}
	sc__seg_geometry(1, ring, &so, &d, &size);
	int fd = memfd_create("evil", MFD_ALLOW_SEALING);
	T_OK(ftruncate(fd, (off_t)size));
	struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_HELLO,
			    .version = SC_LAYOUT_VERSION, .nslots = 1,
			    .ring_size = { ring[0], ring[1] }, .seg_size = size };
	T_EQ(send_msg_fd(s, &m, fd), (ssize_t)sizeof(m));
	/* the victim hangs up on us */
	char b;
	T_EQ(recv(s, &b, 1, 0), 0);
	ftruncate(fd, 0);
	/* a bogus OPEN on a proper group kills that group only */
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	struct sc_msg bad = { .magic = SC_MSG_MAGIC, .type = SC_MSG_OPEN,
			      .version = SC_LAYOUT_VERSION, .slot = 9999 };
	T_EQ(send(c->g->sock, &bad, sizeof(bad), 0), (ssize_t)sizeof(bad));
	T_ASSERT(sc_recv(c, &b, 1, 0) < 0);
	sc_close(c);
	/* and a fresh connection (new group) is served */
	c = t_connect_retry(path, 0, 5000);
	t_send_all(c, "ok", 2);
	t_recv_all(c, &b, 1);
	T_EQ(b, '!');
	sc_close(c);
	return 0;
}

static int raw_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c;
	char buf[2];

	T_OK(sc_listen(path, 0, &l));
	t_log("unsealed segment refused; bogus OPEN kills only its group");
	/* the connection of the group that sent the bogus OPEN may or may not
	 * have reached the backlog before the group died; skip it if it did */
	for (;;) {
		T_OK(sc_accept(l, &c, 0));
		ssize_t n = sc_recv(c, buf, 2, SC_WAITALL);
		if (n == 2)
			break;
		T_ASSERT(n < 0);
		sc_close(c);
	}
	T_ASSERT(!memcmp(buf, "ok", 2));
	T_EQ(sc_send(c, "!", 1, 0), 1);
	struct sc_stats st;
	sc_stats_get(&st);
	T_ASSERT(st.proto_errors >= 2);
	sc_close(c);
	sc_listener_close(l);
	return 0;
}

/* A peer that hands over a pipe instead of an eventfd for its cell: a
 * wake-up written there would raise SIGPIPE (read end closed) or block.
 * The victim must refuse it and live. */
static int pipe_client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	int p[2];
	char b;

	T_OK(pipe(p));
	close(p[0]);
	struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_CELL,
			    .version = SC_LAYOUT_VERSION, .cell = 7 };
	T_EQ(send_msg_fd(c->g->sock, &m, p[1]), (ssize_t)sizeof(m));
	/* ask for a wake-up through that cell */
	atomic_store(&c->g->my_cells[7].armed, SC_ARM_POLL);
	atomic_store(&c->me->cell, 7u);
	atomic_store(&c->rx.h->rx_armed, 1u);
	/* the victim may drop the group before or after this */
	ssize_t n = sc_send(c, "go", 2, 0);
	T_ASSERT(n == 2 || n < 0);
	while ((n = sc_recv(c, &b, 1, 0)) > 0)
		;
	T_ASSERT(n <= 0);
	sc_close(c);
	return 0;
}

static int pipe_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	char b[2];

	t_log("a pipe passed as a wake socket is refused; no SIGPIPE, no hang");
	ssize_t n = sc_recv(c, b, 2, SC_WAITALL);
	T_ASSERT(n == 2 || n < 0);
	/* each send may want to wake the peer through the pipe; the control
	 * thread refuses the CELL message whenever it reads it, and from
	 * then on the connection fails */
	uint64_t t0 = t_now_ms();
	while ((n = sc_send(c, "x", 1, 0)) == 1) {
		T_ASSERT(t_now_ms() - t0 < 5000);
		t_sleep_ms(1);
	}
	T_EQ(n, -EPROTO);
	struct sc_stats st;
	sc_stats_get(&st);
	T_ASSERT(st.proto_errors >= 1);
	sc_close(c);
	sc_listener_close(l);
	return 0;
}

/* Zero-length control messages carrying fds (issue 15: they read as a
 * hang-up, and the fds attached stayed open in the victim: +4 each). */
#define ZERO_MSGS 100
static int zero_client(const char *path, void *arg)
{
	union { char b[CMSG_SPACE(sizeof(int) * 4)]; struct cmsghdr a; } u;
	int nul = open("/dev/null", O_RDONLY);
	int fds[4] = { nul, nul, nul, nul };
	char b;

	T_OK(nul);
	await_(ready[0]);       /* the victim counted its fds */
	for (int k = 0; k < ZERO_MSGS; k++) {
		/* a group each: the first such message ends its group */
		struct sc_conn *c = t_connect_retry(path, 0, 5000);
		struct iovec iov = { &b, 0 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = u.b, .msg_controllen = sizeof(u.b) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(fds));
		memcpy(CMSG_DATA(cm), fds, sizeof(fds));
		T_EQ(sendmsg(c->g->sock, &mh, 0), 0);
		/* the victim hangs up on the group */
		T_ASSERT(sc_recv(c, &b, 1, 0) <= 0);
		sc_close(c);
	}
	signal_(go[1]);
	return 0;
}

static int zero_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c;
	char b;

	T_OK(sc_listen(path, 0, &l));
	int fds0 = t_fd_count();
	t_log("zero-length messages with fds: the fds are closed");
	signal_(ready[1]);
	await_(go[0]);
	/* the connections (if they reached the backlog) end at once */
	while (sc_accept(l, &c, SC_NONBLOCK) == 0) {
		T_ASSERT(sc_recv(c, &b, 1, 0) <= 0);
		sc_close(c);
	}
	/* the control thread frees the dead groups as soon as it can: a
	 * hang guard, not a deadline */
	uint64_t t0 = t_now_ms();
	int fds;
	while ((fds = t_fd_count()) != fds0 && t_now_ms() - t0 < 10000)
		t_sleep_ms(5);
	if (fds != fds0)
		t_fd_dump("after the zero-length messages");
	T_EQ(fds, fds0);
	sc_listener_close(l);
	return 0;
}

/* the pipes that sequence a pair, for every scenario */
static void setup(void)
{
	T_OK(pipe(go));
	T_OK(pipe(done_));
	T_OK(pipe(ready));
}

T_TEST(scribble)
{
	char path[T_PATH_MAX];

	t_run_pair(t_listen_path(path), server, client, NULL);
}

T_TEST(unsealed_memfd)
{
	char path[T_PATH_MAX];

	t_run_pair(t_listen_path(path), raw_server, raw_unsealed, NULL);
}

T_TEST(pipe_for_eventfd)
{
	char path[T_PATH_MAX];

	t_run_pair(t_listen_path(path), pipe_server, pipe_client, NULL);
}

T_TEST(zero_length_msgs)
{
	char path[T_PATH_MAX];

	t_run_pair(t_listen_path(path), zero_server, zero_client, NULL);
}

T_MAIN(setup,
       T_ENTRY(scribble),
       T_ENTRY(unsealed_memfd),
       T_ENTRY(pipe_for_eventfd),
       T_ENTRY(zero_length_msgs))
