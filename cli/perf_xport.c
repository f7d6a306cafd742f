// SPDX-License-Identifier: MIT
/*
 * shortcut perf's transports: kernel TCP on 127.0.0.1, a Unix-domain
 * stream socket, shortcut's C API, and two bare shared-memory floors (a
 * spinning flag, a futex) that move no payload.  Each is a small ops
 * table (perf.h); the measuring bodies in perf.c are written once
 * against it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <linux/futex.h>
#include <sched.h>
#include <unistd.h>

#include "perf.h"

/* ---- tcp and unix ------------------------------------------------------ */

static socklen_t unix_addr(struct sockaddr_un *sun, const char *path)
{
	size_t n = strlen(path);

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, n);
	sun->sun_path[0] = '\0';	/* '@': abstract, nothing left to unlink */
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
}

static struct sockaddr_in tcp_addr(uint16_t port)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	return sin;
}

static int sock_listen(struct xport *x, const struct sockaddr *sa, socklen_t len)
{
	x->lfd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (x->lfd < 0 || bind(x->lfd, sa, len) || listen(x->lfd, 1))
		return -errno;
	return 0;
}

static int tcp_listen(struct xport *x)
{
	struct sockaddr_in sin = tcp_addr(0);
	socklen_t len = sizeof(sin);
	int err = sock_listen(x, (struct sockaddr *)&sin, sizeof(sin));

	if (err)
		return err;
	if (getsockname(x->lfd, (struct sockaddr *)&sin, &len))
		return -errno;
	x->port = ntohs(sin.sin_port);
	return 0;
}

static int unix_listen(struct xport *x)
{
	struct sockaddr_un sun;

	return sock_listen(x, (struct sockaddr *)&sun, unix_addr(&sun, x->path));
}

static int tcp_opts(struct xport *x)
{
	int one = 1;

	if (x->nodelay &&
	    setsockopt(x->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		return -errno;
	return 0;
}

/* One connection per run: the listener goes as soon as it delivered it. */
static int sock_accept(struct xport *x)
{
	int err = 0;

	x->fd = accept4(x->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (x->fd < 0)
		err = -errno;
	close(x->lfd);
	x->lfd = -1;
	return err;
}

static int tcp_accept(struct xport *x)
{
	int err = sock_accept(x);

	return err ? err : tcp_opts(x);
}

static int sock_connect(struct xport *x, const struct sockaddr *sa, socklen_t len)
{
	x->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (x->fd < 0 || connect(x->fd, sa, len))
		return -errno;
	return 0;
}

static int tcp_connect(struct xport *x)
{
	struct sockaddr_in sin = tcp_addr(x->port);
	int err = sock_connect(x, (struct sockaddr *)&sin, sizeof(sin));

	return err ? err : tcp_opts(x);
}

static int unix_connect(struct xport *x)
{
	struct sockaddr_un sun;

	return sock_connect(x, (struct sockaddr *)&sun, unix_addr(&sun, x->path));
}

static ssize_t sock_send(struct xport *x, const void *buf, size_t len)
{
	ssize_t n = send(x->fd, buf, len, MSG_NOSIGNAL);

	return n < 0 ? -errno : n;
}

static ssize_t sock_recv(struct xport *x, void *buf, size_t len, bool all)
{
	ssize_t n = recv(x->fd, buf, len, all ? MSG_WAITALL : 0);

	return n < 0 ? -errno : n;
}

static int sock_shutdown(struct xport *x)
{
	return shutdown(x->fd, SHUT_WR) ? -errno : 0;
}

static int sock_close(struct xport *x)
{
	int err = 0;

	if (x->fd >= 0 && close(x->fd))
		err = -errno;
	if (x->lfd >= 0 && close(x->lfd) && !err)
		err = -errno;
	x->fd = x->lfd = -1;
	return err;
}

const struct xport_ops sc__perf_tcp_ops = {
	.name = "tcp",
	.listen = tcp_listen, .accept = tcp_accept, .connect = tcp_connect,
	.send = sock_send, .recv = sock_recv,
	.shutdown = sock_shutdown, .close = sock_close,
};

const struct xport_ops sc__perf_unix_ops = {
	.name = "unix", .prefix = "@shortcut-perf-unix-",
	.listen = unix_listen, .accept = sock_accept, .connect = unix_connect,
	.send = sock_send, .recv = sock_recv,
	.shutdown = sock_shutdown, .close = sock_close,
};

/* ---- shortcut ---------------------------------------------------------- */

static int scx_listen(struct xport *x)
{
	return sc_listen(x->path, 1, &x->l);
}

static int scx_accept(struct xport *x)
{
	int err = sc_accept(x->l, &x->c, 0);

	sc_listener_close(x->l);
	x->l = NULL;
	return err;
}

static int scx_connect(struct xport *x)
{
	return sc_connect(x->path, &x->c, 0);
}

static ssize_t scx_send(struct xport *x, const void *buf, size_t len)
{
	return sc_send(x->c, buf, len, 0);
}

static ssize_t scx_recv(struct xport *x, void *buf, size_t len, bool all)
{
	return sc_recv(x->c, buf, len, all ? SC_WAITALL : 0);
}

static int scx_shutdown(struct xport *x)
{
	return sc_shutdown(x->c, SHUT_WR);
}

static int scx_close(struct xport *x)
{
	int err = 0;

	if (x->c)
		err = sc_close(x->c);
	if (x->l)
		sc_listener_close(x->l);
	x->c = NULL;
	x->l = NULL;
	return err;
}

const struct xport_ops sc__perf_sc_ops = {
	.name = "shortcut", .prefix = "@shortcut-perf-",
	.listen = scx_listen, .accept = scx_accept, .connect = scx_connect,
	.send = scx_send, .recv = scx_recv,
	.shutdown = scx_shutdown, .close = scx_close,
};

/* ---- shm: one cache line each way, no payload -------------------------- */

static int shm_listen(struct xport *x)
{
	return 0;
}

static int shm_accept(struct xport *x)
{
	x->side = 0;
	return 0;
}

static int shm_connect(struct xport *x)
{
	x->side = 1;
	return 0;
}

static ssize_t shm_send(struct xport *x, const void *buf, size_t len)
{
	__atomic_store_n(&x->sh->flag[x->side].seq, ++x->tx_seq, __ATOMIC_RELEASE);
	return (ssize_t)len;
}

static ssize_t shm_recv(struct xport *x, void *buf, size_t len, bool all)
{
	const uint64_t *f = &x->sh->flag[!x->side].seq;
	uint64_t v;
	unsigned spins = 0;

	while ((v = __atomic_load_n(f, __ATOMIC_ACQUIRE)) == x->rx_seq) {
		cpu_relax();
		/* with fewer CPUs than spinners the peer needs ours to run */
		if (++spins % (1u << 16) == 0)
			sched_yield();
	}
	if (v == SHM_EOF)
		return 0;
	x->rx_seq = v;
	return (ssize_t)len;
}

static int shm_shutdown(struct xport *x)
{
	__atomic_store_n(&x->sh->flag[x->side].seq, SHM_EOF, __ATOMIC_RELEASE);
	return 0;
}

const struct xport_ops sc__perf_shm_ops = {
	.name = "shm", .bare = true,
	.listen = shm_listen, .accept = shm_accept, .connect = shm_connect,
	.send = shm_send, .recv = shm_recv,
	.shutdown = shm_shutdown, .close = shm_shutdown,
};

/*
 * ---- futex: the same, but the receiver sleeps ---------------------------
 * Shared-memory flags with a FUTEX_WAIT/FUTEX_WAKE pair per message and no
 * spinning: the floor for any transport whose receivers sleep (what
 * shortcut does with SHORTCUT_SPIN_US=0), set by the scheduler's wake-up.
 */
#define FUTEX_EOF	UINT32_MAX

static long futex_call(uint32_t *w, int op, uint32_t val)
{
	return syscall(SYS_futex, w, op, val, NULL, NULL, 0);
}

static ssize_t futex_send(struct xport *x, const void *buf, size_t len)
{
	uint32_t *w = &x->sh->fw[x->side].seq;
	uint32_t v = (uint32_t)++x->tx_seq;

	if (v == FUTEX_EOF)		/* skip the end-of-stream value */
		v = (uint32_t)++x->tx_seq;
	__atomic_store_n(w, v, __ATOMIC_RELEASE);
	futex_call(w, FUTEX_WAKE, 1);
	return (ssize_t)len;
}

static ssize_t futex_recv(struct xport *x, void *buf, size_t len, bool all)
{
	uint32_t *w = &x->sh->fw[!x->side].seq;
	uint32_t v;

	while ((v = __atomic_load_n(w, __ATOMIC_ACQUIRE)) == (uint32_t)x->rx_seq)
		futex_call(w, FUTEX_WAIT, v);
	if (v == FUTEX_EOF)
		return 0;
	x->rx_seq = v;
	return (ssize_t)len;
}

static int futex_shutdown(struct xport *x)
{
	uint32_t *w = &x->sh->fw[x->side].seq;

	__atomic_store_n(w, FUTEX_EOF, __ATOMIC_RELEASE);
	futex_call(w, FUTEX_WAKE, 1);
	return 0;
}

const struct xport_ops sc__perf_futex_ops = {
	.name = "futex", .bare = true,
	.listen = shm_listen, .accept = shm_accept, .connect = shm_connect,
	.send = futex_send, .recv = futex_recv,
	.shutdown = futex_shutdown, .close = futex_shutdown,
};
