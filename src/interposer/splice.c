/* SPDX-License-Identifier: MIT */
/*
 * splice and sendfile on an accelerated socket: a pipe's bytes into the
 * ring or out of it, a file's into the send path (data.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "conn.h"
#include "ring.h"
#include "interposer.h"

/* ---- splice and sendfile ----------------------------------------------------
 *
 * The kernel moves only what the other end takes: bytes stay in the pipe
 * (or the file) when the socket is full, and in the socket when the pipe
 * is.  So do we.  Into an accelerated socket, the pipe is read under the
 * connection's send lock for at most the ring's room, without waiting,
 * straight into the ring (sc__send_from: we are the ring's only producer,
 * so the room can only grow meanwhile); out of one, the ring's bytes are
 * offered to the pipe under the receive lock and only what it took is
 * consumed (sc__recv_to).  A file is read at an offset (pread) and its
 * offset, or position, moves by what was sent.  What the kernel refuses
 * it refuses before it moves a byte, and says so itself: such calls go to
 * it as they are.
 */

/* The last pipes this thread spliced with: their fd, inode and flags,
 * and fd_rebinds then.  A splice that does not wait (SPLICE_F_NONBLOCK:
 * the pipe's own O_NONBLOCK does not matter) on a pipe found here by fd
 * and inode, no fd closed or bound again since, needs no F_GETFL (its
 * flags are its open file description's; the packet mode, pipe2's, is
 * the same for both ends of a pipe).  Go's io.Copy splices each message
 * twice through a pipe it keeps. */
#define PIPE_SEEN 8
static __thread struct pipe_seen {
	int fd;
	dev_t dev;
	ino_t ino;
	int fl;
	uint32_t gen;
} pipe_seen[PIPE_SEEN];
static __thread unsigned pipe_seen_next;

static int pipe_flags(int fd, const struct stat *st, unsigned int flags)
{
	struct pipe_seen *e = NULL;
	if (!atomic_load_explicit(&fd_rebinds_on, memory_order_relaxed))
		atomic_store_explicit(&fd_rebinds_on, true, memory_order_seq_cst);
	uint32_t gen = atomic_load_explicit(&fd_rebinds, memory_order_seq_cst);
	for (int i = 0; i < PIPE_SEEN; i++)
		if (pipe_seen[i].fd == fd + 1 && pipe_seen[i].dev == st->st_dev &&
		    pipe_seen[i].ino == st->st_ino)
			e = &pipe_seen[i];
	if (e && e->gen == gen && (flags & SPLICE_F_NONBLOCK))
		return e->fl;
	int fl = R(fcntl)(fd, F_GETFL);
	if (fl < 0)
		return fl;
	if (!e)
		e = &pipe_seen[pipe_seen_next++ % PIPE_SEEN];
	*e = (struct pipe_seen){ fd + 1, st->st_dev, st->st_ino, fl, gen };    /* (fd 0: none) */
	return fl;
}

/* fd as the pipe end of a splice: a pipe (or FIFO) open for reading
 * (reading) or writing; false if not. */
static bool pipe_open(struct pipe_io *p, int fd, bool reading, unsigned int flags)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode))
		return false;
	int fl = pipe_flags(fd, &st, flags), acc = fl & O_ACCMODE;
	if (fl < 0 || (reading ? acc == O_WRONLY : acc == O_RDONLY))
		return false;
	*p = (struct pipe_io){ .fd = fd, .nonblock = fl & O_NONBLOCK, .packet = fl & O_DIRECT,
			       .tmp = { -1, -1 } };
	return true;
}

/* A pipe of our own for one call (nonblocking both ends): what the
 * kernel's splice between two pipes moves, it moves without waiting, a
 * packet's part at a time, and it keeps the rest. */
static int pipe_tmp(struct pipe_io *p)
{
	if (p->tmp[0] >= 0)
		return 0;
	return pipe2(p->tmp, O_NONBLOCK | O_CLOEXEC) < 0 ? -errno : 0;
}

static void pipe_tmp_close(struct pipe_io *p)
{
	if (p->tmp[0] < 0)
		return;
	KEEP_ERRNO();
	R(close)(p->tmp[0]);
	R(close)(p->tmp[1]);
	p->tmp[0] = p->tmp[1] = -1;
}

/* A send's reader (struct sc_src; also for the pending buffer, under
 * s->lock): at most v's bytes of the pipe's, never waiting; 0 when it has
 * none (dry). */
ssize_t pipe_read_now(void *arg, const struct iovec *v, int n)
{
	static _Atomic bool no_nowait;  /* a kernel without RWF_NOWAIT on pipes */
	struct pipe_io *p = arg;
	size_t want = 0;
	ssize_t k;

	if (p->dry)
		return 0;
	for (int i = 0; i < n; i++)
		want += v[i].iov_len;
	if (!p->packet && !atomic_load_explicit(&no_nowait, memory_order_relaxed)) {
		k = preadv2(p->fd, v, n, -1, RWF_NOWAIT);
		if (k >= 0 || errno != EOPNOTSUPP) {
			if (k > 0 && (size_t)k < want)
				p->dry = true;          /* it gave all it had */
			goto out;
		}
		atomic_store_explicit(&no_nowait, true, memory_order_relaxed);
	}
	/* a packet read short drops the packet's rest: splice moves part of
	 * one and keeps the rest, into our pipe, then read whole */
	if ((k = pipe_tmp(p)) < 0)
		return k;
	k = R(splice)(p->fd, NULL, p->tmp[1], NULL, want, SPLICE_F_NONBLOCK);
	if (k > 0 && R(readv)(p->tmp[0], v, n) != k)
		return -EIO;                    /* (our pipe, whole: never) */
out:
	if (k > 0)
		return k;
	if (k == 0 || errno == EAGAIN) {
		p->dry = true;
		return 0;
	}
	return -errno;
}

/* A receive's writer into a pipe that is not a packet pipe, in one
 * system call: a write that never waits (RWF_NOWAIT, whatever the pipe's
 * O_NONBLOCK) takes what fits, page by page as the kernel's splice from a
 * socket does, and says EPIPE (with SIGPIPE) when nobody reads.  1 with
 * *r its result; 0 where the kernel has no RWF_NOWAIT for pipe writes. */
static int pipe_write_direct(struct pipe_io *p, const struct iovec *v, int n, size_t total,
			     ssize_t *r)
{
	static _Atomic bool no_nowait;
	if (p->packet || atomic_load_explicit(&no_nowait, memory_order_relaxed))
		return 0;
	ssize_t w = pwritev2(p->fd, v, n, -1, RWF_NOWAIT);
	if (w < 0 && errno == EOPNOTSUPP) {
		atomic_store_explicit(&no_nowait, true, memory_order_relaxed);
		return 0;
	}
	if (w < 0 && errno == EAGAIN)
		w = -EAGAIN;
	else if (w < 0)
		w = -errno;
	p->full = w == -EAGAIN || (w >= 0 && (size_t)w < total);
	*r = w;
	return 1;
}

/* A receive's writer (struct sc_dst): into the pipe what it takes of v
 * without waiting: directly (above), else through our pipe: the kernel's
 * splice between pipes takes what fits in the program's, page by page,
 * keeps a packet's rest, and says EPIPE (with SIGPIPE) when nobody reads
 * it; what it left in ours goes with ours. */
ssize_t pipe_write_now(void *arg, const struct iovec *v, int n)
{
	struct pipe_io *p = arg;
	size_t total = 0, done = 0;
	ssize_t r;
	int rc;

	for (int i = 0; i < n; i++)
		total += v[i].iov_len;
	if (pipe_write_direct(p, v, n, total, &r))
		return r;
	if ((rc = pipe_tmp(p)) < 0)
		return rc;
	while (done < total) {
		struct iovec rest[2];
		int k = sc__iov_rest(v, n, done, rest);
		ssize_t w = R(writev)(p->tmp[1], rest, k);
		if (w <= 0)
			return done ? (ssize_t)done : -EAGAIN;
		ssize_t m = R(splice)(p->tmp[0], NULL, p->fd, NULL, (size_t)w, SPLICE_F_NONBLOCK);
		if (m < 0)
			rc = -errno;
		if (m > 0)
			done += (size_t)m;
		if (m < w) {
			pipe_tmp_close(p);
			p->full = m >= 0 || rc == -EAGAIN;
			return done ? (ssize_t)done : m < 0 ? rc : -EAGAIN;
		}
	}
	return (ssize_t)done;
}

/* The first send to a peer that closed takes what the pipe has (up to
 * len), as the kernel's does; the count. */
size_t pipe_discard(struct pipe_io *p, size_t len)
{
	char buf[16384];
	size_t done = 0;
	while (done < len) {
		struct iovec v = { buf, len - done < sizeof(buf) ? len - done : sizeof(buf) };
		ssize_t k = pipe_read_now(p, &v, 1);
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	return done;
}

/* After a wait that a signal cut short (poll is never restarted):
 * whether the kernel would have restarted the splice.  We cannot tell
 * which handler ran: yes if every handler that could have (for a signal
 * this thread does not block, not a fault's, which comes only from what
 * the thread itself runs) has SA_RESTART. */
static bool restartable(void)
{
	sigset_t blocked;
	pthread_sigmask(SIG_BLOCK, NULL, &blocked);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
		    sig == SIGTRAP || sig == SIGSYS || sigismember(&blocked, sig) == 1)
			continue;
		if (sigaction(sig, NULL, &sa) == 0 && !(sa.sa_flags & SA_RESTART) &&
		    ((sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_DFL &&
						     sa.sa_handler != SIG_IGN)))
			return false;
	}
	return true;
}

/* A splice's wait for its pipe, as the kernel's (data to read: POLLIN;
 * room: POLLOUT): 1 ready; 0 nothing to read and no writer; -EAGAIN
 * (nb); -EPIPE with SIGPIPE, no reader; -EINTR. */
static int pipe_wait(int fd, short ev, bool nb)
{
	for (;;) {
		struct pollfd q = { .fd = fd, .events = ev };
		if (R(poll)(&q, 1, nb ? 0 : -1) < 0) {
			if (errno == EINTR && restartable())
				continue;
			return -errno;
		}
		if (q.revents & POLLNVAL)
			return -EBADF;
		if (ev == POLLOUT && (q.revents & POLLERR)) {
			raise(SIGPIPE);
			return -EPIPE;
		}
		if (q.revents & ev)
			return 1;
		if (q.revents & POLLHUP)
			return 0;
		if (nb)
			return -EAGAIN;
	}
}

/* splice from a pipe into accelerated socket fd: the kernel waits for the
 * pipe first (unless SPLICE_F_NONBLOCK or the pipe's O_NONBLOCK), then
 * for the socket (its own O_NONBLOCK, SO_SNDTIMEO), then moves until len,
 * or the pipe is empty, or the socket full. */
static ssize_t splice_to_sock(int fd, struct sc_sock *s, struct pipe_io *p, size_t len,
			      unsigned int flags)
{
	bool nb = (flags & SPLICE_F_NONBLOCK) || p->nonblock;
	struct xfer x = { .pipe = p, .len = len, .sflags = flags };
	for (;;) {
		int w = pipe_wait(p->fd, POLLIN, nb);
		if (w <= 0)
			return w;
		p->dry = false;
		ssize_t n = do_send(fd, s, &x, flags & SPLICE_F_MORE ? MSG_MORE : 0, tcp_sendv);
		if (n != 0 || !p->dry)
			return n < 0 ? -errno : n;
		/* another reader took the bytes we saw: wait again */
	}
}

/* splice (or sendfile) from accelerated socket fd into a pipe: the kernel
 * waits for room in the pipe first (unless SPLICE_F_NONBLOCK or the
 * pipe's O_NONBLOCK), then for the socket's bytes (its own O_NONBLOCK,
 * SO_RCVTIMEO), and moves what is there and fits. */
static ssize_t splice_from_sock(int fd, struct sc_sock *s, struct pipe_io *p, size_t len,
				unsigned int flags)
{
	bool nb = (flags & SPLICE_F_NONBLOCK) || p->nonblock;
	struct xfer x = { .pipe = p, .len = len, .sflags = flags };
	if (nb && s->nonblock) {
		/* nothing waits: the bytes first, a poll of the pipe only if
		 * they did not move (one call less for Go's io.Copy).  The
		 * write says EPIPE (with SIGPIPE) and takes only what fits, as
		 * the kernel's splice; an empty socket, its end, or a full
		 * pipe is asked again in the kernel's order below: the pipe's
		 * room first (EAGAIN, EPIPE), then the socket.  A socket's
		 * error is said at once (the kernel would say EAGAIN first
		 * were the pipe full). */
		ssize_t n = do_recv(fd, s, &x, 0, tcp_recvv);
		if (n < 0)
			n = -errno;
		if (n != 0 && n != -EAGAIN)
			return n;
	}
	for (;;) {
		int w = pipe_wait(p->fd, POLLOUT, nb);
		if (w < 0)
			return w;
		p->full = false;
		ssize_t n = do_recv(fd, s, &x, 0, tcp_recvv);
		if (n < 0)
			n = -errno;
		if (n != -EAGAIN || !p->full || nb)
			return n;
		/* another writer filled the pipe: wait again */
	}
}

/* A splice (or sendfile) between pipe p and accelerated socket fd (to:
 * into the socket): the bytes moved, or -errno. */
static ssize_t splice_shm(int fd, struct sc_sock *s, struct pipe_io *p, size_t len,
			  unsigned int flags, bool to)
{
	KEEP_ERRNO();
	ssize_t n = to ? splice_to_sock(fd, s, p, len, flags) :
			 splice_from_sock(fd, s, p, len, flags);
	pipe_tmp_close(p);
	return n;
}

SC_API ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		      unsigned int flags)
{
	struct sc_sock *so = sock_get(out), *si = sock_get(in);
	bool to_shm = so && route_off_kernel(sock_where(so));
	bool from_shm = si && route_off_kernel(sock_where(si));
	struct pipe_io p;
	/* the kernel refuses: no length, an unknown flag, an offset on either
	 * side (the socket has none, the pipe's is ESPIPE), no pipe on the
	 * other side, a pipe end the wrong way round */
	unsigned int known = SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT;
	if (to_shm != from_shm && len && !(flags & ~known) && !off_in && !off_out &&
	    pipe_open(&p, to_shm ? in : out, to_shm, flags))
		return sc_ret(splice_shm(to_shm ? out : in, to_shm ? so : si, &p, len, flags,
					 to_shm));
	tcp_gate(so);
	ssize_t n = R(splice)(in, off_in, out, off_out, len, flags);
	if (so)
		tcp_count(so, true, n);
	if (si)
		tcp_count(si, false, n);
	return n;
}

/* A file's bytes (at its offset, or position, which moves by what was
 * sent) into accelerated socket out, through the send path: the count,
 * or -errno. */
static ssize_t file_to_sock(int out, int in, off_t *off, size_t count)
{
	KEEP_ERRNO();
	int err = 0;
	off_t pos = off ? *off : lseek(in, 0, SEEK_CUR);
	if (pos < 0)
		return -errno;
	char buf[65536];
	size_t done = 0;
	while (done < count) {
		size_t want = count - done < sizeof(buf) ? count - done : sizeof(buf);
		ssize_t r = pread(in, buf, want, pos);
		if (r <= 0) {
			err = r ? errno : 0;
			break;
		}
		ssize_t w = send(out, buf, (size_t)r, MSG_NOSIGNAL);
		if (w < 0) {
			err = errno;
			if (err == EPIPE)
				raise(SIGPIPE);
			break;
		}
		done += (size_t)w;
		pos += w;
		if (w < r)
			break;
	}
	if (err && !done)
		return -err;
	if (off)
		*off = pos;
	else if (done)
		lseek(in, pos, SEEK_SET);
	return (ssize_t)done;
}

/* sendfile into an accelerated socket: from a file only (the kernel
 * refuses anything else), at its offset (or position), which moves by
 * what was sent.  From an accelerated socket into a pipe: as splice. */
SC_API ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct sc_sock *so = sock_get(out), *si = sock_get(in);
	struct pipe_io p;
	if (si && route_off_kernel(sock_where(si)) && !off && count &&
	    pipe_open(&p, out, false, 0))
		return sc_ret(splice_shm(in, si, &p, count, 0, false));
	struct stat st;
	if (!so || sock_mode(so) == M_TCP || fstat(in, &st) < 0 ||
	    (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))) {
		tcp_gate(so);
		ssize_t n = R(sendfile)(out, in, off, count);
		if (so)
			tcp_count(so, true, n);
		return n;
	}
	return sc_ret(file_to_sock(out, in, off, count));
}

SC_API ssize_t sendfile64(int out, int in, off_t *off, size_t count)
	__attribute__((alias("sendfile")));
