/* SPDX-License-Identifier: MIT */
/* Edge-triggered echo, the pattern that hangs when an edge is lost: both
 * ends nonblocking, every fd registered EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET,
 * every read and write goes on until EAGAIN (or until the program chooses
 * to stop, remembering that the fd is still ready) and then waits for the
 * next edge.  The client connects 4 connections at once (nonblocking
 * connect, completion by the EPOLLOUT edge) and sends on each 800 framed
 * messages of random sizes (1 byte to 400 KB, fixed seed), each with one
 * send, in phases of 50: ping-pong (the next message only once the echo of
 * the last is in), at most 64 KB or 1 MB unanswered, then no limit with
 * reading stopped until 2 MB more are sent, so that the server's writes
 * hit EAGAIN and need a new EPOLLOUT edge.  The server (listener in the
 * same set, EPOLLET, accept until EAGAIN) echoes, reading random amounts,
 * counts the messages and checksums them; epoll_wait gets at most 3 events
 * per call on both sides.  A wait of 5 s (client; server 6 s) with nothing
 * reported fails, each side printing its state on stderr.
 * (SO_RCVBUF/SO_SNDBUF of 64 KB make kernel TCP's writes see EAGAIN as
 * often as the 1 MiB rings do.) */
#include "common.h"
#include <sys/epoll.h>

#define NCONN 4
#define NMSG 800
#define HOLD_BYTES (2u << 20)

static uint64_t rng_state;
static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static size_t msg_size(int i)
{
	if ((i / 50) % 4 == 3)
		return 16384 + rnd() % 114688;  /* the bulk phase */
	uint64_t r = rnd() % 1000;
	if (r < 600)
		return 1 + rnd() % 256;
	if (r < 900)
		return 257 + rnd() % 7936;
	if (r < 990)
		return 8193 + rnd() % 57344;
	return 65537 + rnd() % 334464;
}

static unsigned long n_wagain, n_ragain, n_waits;  /* stderr only: how hard it was */

static int wait_events(int ep, struct epoll_event *ev, int timeout)
{
	int n;
	do
		n = epoll_wait(ep, ev, 3, timeout);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		fatal("epoll_wait");
	n_waits++;
	return n;
}

/* ---- server ------------------------------------------------------------------ */

struct sconn {
	int fd;
	bool rd, wr;            /* readiness known from the last edge */
	bool eof, closed;
	char *buf;              /* bytes to echo: [head, tail) */
	size_t head, tail, cap;
	/* parsing */
	uint32_t id;
	unsigned hdr_got;       /* of the id, then of each length */
	unsigned char hdr[4];
	uint32_t left;          /* payload bytes of the current message */
	uint64_t msgs, bytes, echoed, h;
	bool have_id;
};

static void parse(struct sconn *c, const unsigned char *p, size_t n)
{
	c->bytes += n;
	while (n) {
		if (c->left) {
			size_t k = n < c->left ? n : c->left;
			c->h = ck(c->h, p, k);
			c->left -= (uint32_t)k;
			p += k;
			n -= k;
			continue;
		}
		c->hdr[c->hdr_got++] = *p++;
		n--;
		if (c->hdr_got < 4)
			continue;
		c->hdr_got = 0;
		uint32_t v = (uint32_t)c->hdr[0] | (uint32_t)c->hdr[1] << 8 |
			     (uint32_t)c->hdr[2] << 16 | (uint32_t)c->hdr[3] << 24;
		if (!c->have_id) {
			c->have_id = true;
			c->id = v;
		} else {
			c->msgs++;
			c->left = v;
		}
	}
}

static void s_read(struct sconn *c)
{
	static unsigned char tmp[65536];
	while (c->rd && !c->eof) {
		size_t want = 1 + rnd() % sizeof(tmp);
		ssize_t r = recv(c->fd, tmp, want, 0);
		if (r < 0 && errno == EAGAIN) {
			c->rd = false;
			n_ragain++;
			break;
		}
		if (r < 0)
			fatal("server recv");
		if (r == 0) {
			c->eof = true;
			break;
		}
		parse(c, tmp, (size_t)r);
		if (c->tail + (size_t)r > c->cap) {
			if (c->head) {
				memmove(c->buf, c->buf + c->head, c->tail - c->head);
				c->tail -= c->head;
				c->head = 0;
			}
			while (c->tail + (size_t)r > c->cap)
				c->cap = c->cap ? c->cap * 2 : 1 << 20;
			c->buf = realloc(c->buf, c->cap);
			if (!c->buf)
				fatal("realloc");
		}
		memcpy(c->buf + c->tail, tmp, (size_t)r);
		c->tail += (size_t)r;
	}
}

static void s_write(struct sconn *c)
{
	while (c->wr && c->head < c->tail) {
		ssize_t w = send(c->fd, c->buf + c->head, c->tail - c->head, MSG_NOSIGNAL);
		if (w < 0 && errno == EAGAIN) {
			c->wr = false;
			n_wagain++;
			break;
		}
		if (w <= 0)
			fatal("server send");
		c->head += (size_t)w;
		c->echoed += (uint64_t)w;
	}
	if (c->head == c->tail)
		c->head = c->tail = 0;
}

static void server(int lfd)
{
	struct sconn cs[NCONN];
	int nc = 0, nclosed = 0;
	struct epoll_event ev[3];

	rng_state = 0x9e3779b97f4a7c15ull;
	memset(cs, 0, sizeof(cs));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || fcntl(lfd, F_SETFL, O_NONBLOCK) < 0)
		fatal("epoll_create1/fcntl");
	struct epoll_event le = { .events = EPOLLIN | EPOLLET, .data.u64 = NCONN };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &le) < 0)
		fatal("epoll_ctl listener");
	bool lready = false;
	tell();                                 /* client: go */
	while (nclosed < NCONN) {
		int n = wait_events(ep, ev, 6000);  /* the client gives up first */
		if (n == 0) {
			for (int i = 0; i < nc; i++)
				fprintf(stderr, "server conn %d: id %u rd %d wr %d eof %d closed %d "
					"got %llu echoed %llu queued %zu\n", i, cs[i].id, cs[i].rd,
					cs[i].wr, cs[i].eof, cs[i].closed,
					(unsigned long long)cs[i].bytes,
					(unsigned long long)cs[i].echoed, cs[i].tail - cs[i].head);
			fatal("server: no event for 6 s (accepted %d, closed %d)", nc, nclosed);
		}
		for (int i = 0; i < n; i++) {
			if (ev[i].data.u64 == NCONN) {
				lready = true;
				continue;
			}
			struct sconn *c = &cs[ev[i].data.u64];
			if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				c->rd = true;
			if (ev[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
				c->wr = true;
		}
		while (lready) {
			int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
			if (fd < 0 && errno == EAGAIN) {
				lready = false;
				break;
			}
			if (fd < 0)
				fatal("accept4");
			if (nc == NCONN)
				fatal("too many connections");
			struct sconn *c = &cs[nc];
			int sz = 65536;
			setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
			c->fd = fd;
			c->h = CK_INIT;
			struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
						 .data.u64 = (uint64_t)nc };
			if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) < 0)
				fatal("epoll_ctl ADD");
			nc++;
		}
		for (int i = 0; i < nc; i++) {
			struct sconn *c = &cs[i];
			if (c->closed)
				continue;
			s_read(c);
			s_write(c);
			if (c->eof && c->head == c->tail) {
				if (close(c->fd) < 0)
					fatal("close");
				c->closed = true;
				nclosed++;
			}
		}
	}
	fprintf(stderr, "server: %lu waits, %lu write EAGAIN, %lu read EAGAIN\n", n_waits,
		n_wagain, n_ragain);
	say("accepted %d connections, all closed", nc);
	for (uint32_t id = 0; id < NCONN; id++) {
		int i = 0;
		while (i < nc && cs[i].id != id)
			i++;
		if (i == nc) {
			say("connection %u: missing", id);
			continue;
		}
		struct sconn *c = &cs[i];
		say("connection %u: %llu messages, %llu bytes (checksum %016llx), echoed %llu, "
		    "EOF seen", id, (unsigned long long)c->msgs, (unsigned long long)c->bytes,
		    (unsigned long long)c->h, (unsigned long long)c->echoed);
		free(c->buf);
	}
	close(ep);
}

/* ---- client ------------------------------------------------------------------ */

struct cconn {
	int fd;
	bool connected, rd, wr, shut, eof;
	unsigned char *stream;
	size_t len, sent, got;
	size_t *ends;           /* end offset of each message */
	int next_msg;           /* first message not completely sent */
	size_t hold_until;      /* no reading while sent < hold_until */
	bool equal;
	int nmsg;
};

static void build(struct cconn *c, uint32_t id)
{
	size_t sizes[NMSG], total = 4;
	rng_state = 0x5eed0000ull + id * 7919;
	for (int i = 0; i < NMSG; i++) {
		sizes[i] = msg_size(i);
		total += 4 + sizes[i];
	}
	c->stream = malloc(total);
	c->ends = malloc(sizeof(size_t) * NMSG);
	if (!c->stream || !c->ends)
		fatal("malloc");
	memcpy(c->stream, &id, 4);      /* little endian, as the server reads it */
	size_t off = 4;
	for (int i = 0; i < NMSG; i++) {
		uint32_t l = (uint32_t)sizes[i];
		memcpy(c->stream + off, &l, 4);
		pattern(c->stream + off + 4, l, off, id);
		off += 4 + l;
		c->ends[i] = off;
	}
	c->len = total;
	c->equal = true;
	c->nmsg = NMSG;
}

/* Messages go in phases of 50: at most one message unanswered (ping-pong),
 * 64 KB, 1 MB, then no limit with reading stopped until 2 MB more are
 * sent (the server's echo then hits EAGAIN). */
#define UNLIMITED ((size_t)-1)
static size_t window(const struct cconn *c)
{
	static const size_t w[4] = { 1, 65536, 1 << 20, UNLIMITED };
	return w[(c->next_msg / 50) % 4];
}

static bool holding(const struct cconn *c)
{
	return c->sent < c->hold_until && c->sent < c->len && window(c) == UNLIMITED;
}

static bool may_send(const struct cconn *c)
{
	if (!c->connected || !c->wr || c->sent == c->len)
		return false;
	/* a message begun is finished; a new one waits for the window */
	return c->next_msg == 0 || c->sent != c->ends[c->next_msg - 1] ||
	       window(c) == UNLIMITED || c->sent - c->got < window(c);
}

static void c_write(struct cconn *c)
{
	while (may_send(c)) {
		size_t end = c->ends[c->next_msg];
		ssize_t w = send(c->fd, c->stream + c->sent, end - c->sent, MSG_NOSIGNAL);
		if (w < 0 && errno == EAGAIN) {
			c->wr = false;
			n_wagain++;
			break;
		}
		if (w <= 0)
			fatal("client send");
		c->sent += (size_t)w;
		if (c->sent == end) {
			c->next_msg++;
			if (c->next_msg % 200 == 150)
				c->hold_until = c->sent + HOLD_BYTES;
		}
	}
	if (c->connected && !c->shut && c->sent == c->len) {
		if (shutdown(c->fd, SHUT_WR) < 0)
			fatal("shutdown");
		c->shut = true;
	}
}

static void c_read(struct cconn *c)
{
	static unsigned char tmp[65536];
	if (holding(c))
		return;
	while (c->rd && !c->eof) {
		ssize_t r = recv(c->fd, tmp, sizeof(tmp), 0);
		if (r < 0 && errno == EAGAIN) {
			c->rd = false;
			n_ragain++;
			break;
		}
		if (r < 0)
			fatal("client recv");
		if (r == 0) {
			c->eof = true;
			break;
		}
		if (c->got + (size_t)r > c->sent || memcmp(tmp, c->stream + c->got, (size_t)r))
			c->equal = false;
		c->got += (size_t)r;
	}
}

static bool c_busy(struct cconn *c)
{
	return (c->rd && !c->eof && !holding(c)) || may_send(c);
}

static void client(void)
{
	struct cconn cs[NCONN];
	struct epoll_event ev[3];
	struct sockaddr_in a = t_addr();

	memset(cs, 0, sizeof(cs));
	for (int i = 0; i < NCONN; i++)
		build(&cs[i], (uint32_t)i);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		fatal("epoll_create1");
	await_peer();
	int inprogress = 0;
	for (int i = 0; i < NCONN; i++) {
		struct cconn *c = &cs[i];
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (c->fd < 0)
			fatal("socket");
		/* kernel TCP: small buffers, so that its writes see EAGAIN too */
		int sz = 65536;
		setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
		int rc = connect(c->fd, (struct sockaddr *)&a, sizeof(a));
		if (rc < 0 && errno != EINPROGRESS)
			fatal("connect");
		if (rc < 0)
			inprogress++;
		struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
					 .data.u64 = (uint64_t)i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) < 0)
			fatal("epoll_ctl ADD");
	}
	say("connect: %s", inprogress == NCONN ? "EINPROGRESS for all" : "some at once");
	int done = 0, connected = 0;
	bool refused = false;
	while (done < NCONN) {
		bool busy = false;
		for (int i = 0; i < NCONN; i++)
			busy |= c_busy(&cs[i]);
		int n = wait_events(ep, ev, busy ? 0 : 5000);
		if (n == 0 && !busy) {
			for (int i = 0; i < NCONN; i++)
				fprintf(stderr, "client conn %d: conn %d rd %d wr %d shut %d eof %d "
					"sent %zu/%zu got %zu hold %zu message %d window %zd\n", i,
					cs[i].connected, cs[i].rd, cs[i].wr, cs[i].shut, cs[i].eof,
					cs[i].sent, cs[i].len, cs[i].got, cs[i].hold_until,
					cs[i].next_msg, (ssize_t)window(&cs[i]));
			msleep(2500);           /* the server prints its side at 6 s */
			fatal("client: no event for 5 s (done %d)", done);
		}
		for (int i = 0; i < n; i++) {
			struct cconn *c = &cs[ev[i].data.u64];
			if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				c->rd = true;
			if (ev[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
				c->wr = true;
			if (!c->connected && (ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
				int err = 0;
				socklen_t l = sizeof(err);
				getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
				if (err)
					refused = true;
				c->connected = true;
				connected++;
			}
		}
		for (int i = 0; i < NCONN; i++) {
			struct cconn *c = &cs[i];
			if (c->eof)
				continue;
			c_write(c);
			c_read(c);
			c_write(c);             /* the window may have opened */
			if (c->eof) {
				if (close(c->fd) < 0)
					fatal("close");
				done++;
			}
		}
	}
	fprintf(stderr, "client: %lu waits, %lu write EAGAIN, %lu read EAGAIN\n", n_waits,
		n_wagain, n_ragain);
	say("%d connected, errors: %s", connected, yesno(refused));
	for (int i = 0; i < NCONN; i++) {
		struct cconn *c = &cs[i];
		say("connection %d: sent %d messages, %zu bytes; echo %zu bytes, equal: %s", i,
		    c->nmsg, c->sent, c->got, yesno(c->equal && c->got == c->len));
		free(c->stream);
		free(c->ends);
	}
	close(ep);
}

int main(void)
{
	return run(server, client);
}
