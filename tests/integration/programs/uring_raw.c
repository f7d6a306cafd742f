/* SPDX-License-Identifier: MIT */
/* Like uring_echo.c, but the ring is made with the io_uring_setup system
 * call itself (syscall(2), no liburing) and driven through its mmap'd
 * submission and completion rings: a client talks to an echo server with
 * send/recv first, leaving 30000 echoed bytes unread, then reads them and
 * goes on through the ring (IORING_OP_RECV / IORING_OP_SEND) on the same
 * socket, then opens a second connection.  Prints one line per step;
 * exits 1 on any mismatch, 2 if io_uring is unavailable; a ring op that
 * waits more than 5 seconds ends the run.  Used by
 * tests/integration/test_uring_raw.py. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static int ring_setup(struct ring *r, unsigned entries)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
	if (r->fd < 0)
		return -1;
	size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
	if (single && cq_sz > sq_sz)
		sq_sz = cq_sz;
	char *sq = mmap(NULL, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
			IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		return -1;
	char *cq = single ? sq : mmap(NULL, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
				      r->fd, IORING_OFF_CQ_RING);
	if (cq == MAP_FAILED)
		return -1;
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED)
		return -1;
	r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned *)(sq + p.sq_off.array);
	r->cq_head = (unsigned *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/* one op through the ring, waited for; returns its result (-errno) */
static int ring_op(struct ring *r, int op, int fd, void *buf, size_t len)
{
	unsigned tail = *r->sq_tail;            /* only we write it */
	unsigned idx = tail & *r->sq_mask;
	struct io_uring_sqe *sqe = &r->sqes[idx];
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = (uint8_t)op;
	sqe->fd = fd;
	sqe->addr = (uintptr_t)buf;
	sqe->len = (uint32_t)len;
	sqe->user_data = tail;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	unsigned submit = 1;
	unsigned head = *r->cq_head;            /* only we write it */
	while (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
		long n = syscall(__NR_io_uring_enter, r->fd, submit, 1, IORING_ENTER_GETEVENTS, NULL, 0);
		if (n < 0 && errno != EINTR) {
			perror("io_uring_enter");
			exit(1);
		}
		if (n > 0)
			submit = 0;
	}
	int res = r->cqes[head & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(1);
	}
	return fd;
}

static void pattern(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((i * 131 + seed + (i >> 9)) & 255);
}

static void on_alarm(int sig)
{
	static const char msg[] = "ring op still waiting after 5 seconds\n";
	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0) {
	}
	_exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	int port = atoi(argv[1]);
	int fd = dial(port);
	static unsigned char out[100000], in[100000];
	/* plain calls first (through shared memory): 50000 out, 20000 of the
	 * echo read back, the other 30000 left unread */
	pattern(out, 50000, 1);
	if (send(fd, out, 50000, 0) != 50000)
		return 1;
	size_t got = 0;
	while (got < 20000) {
		ssize_t r = recv(fd, in + got, 20000 - got, 0);
		if (r <= 0)
			return 1;
		got += (size_t)r;
	}
	printf("plain echo of 20000 exact: %s\n", memcmp(in, out, 20000) ? "no" : "yes");
	usleep(200000);                         /* the rest of the echo is back, unread */
	/* the ring, made without liburing */
	struct ring ring;
	if (ring_setup(&ring, 8) < 0) {
		printf("io_uring unavailable\n");
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm(5);
	while (got < 50000) {
		int r = ring_op(&ring, IORING_OP_RECV, fd, in + got, 50000 - got);
		if (r <= 0) {
			printf("ring recv = %d\n", r);
			return 1;
		}
		got += (size_t)r;
	}
	printf("ring recv of the unread 30000 exact: %s\n", memcmp(in, out, 50000) ? "no" : "yes");
	pattern(out, sizeof(out), 7);
	size_t sent = 0;
	got = 0;
	while (got < sizeof(out)) {
		if (sent < sizeof(out)) {
			size_t n = sizeof(out) - sent < 30000 ? sizeof(out) - sent : 30000;
			int r = ring_op(&ring, IORING_OP_SEND, fd, out + sent, n);
			if (r <= 0) {
				printf("ring send = %d\n", r);
				return 1;
			}
			sent += (size_t)r;
		}
		int r = ring_op(&ring, IORING_OP_RECV, fd, in + got, sizeof(in) - got);
		if (r <= 0) {
			printf("ring recv = %d\n", r);
			return 1;
		}
		got += (size_t)r;
	}
	alarm(0);
	printf("ring echo of %zu bytes exact: %s\n", got, memcmp(in, out, sizeof(out)) ? "no" : "yes");
	close(ring.fd);
	close(fd);
	/* a connection made after the ring: stays on TCP */
	fd = dial(port);
	if (send(fd, "x", 1, 0) != 1 || recv(fd, in, 1, 0) != 1 || in[0] != 'x')
		return 1;
	printf("second connection echoes: yes\n");
	close(fd);
	return 0;
}
