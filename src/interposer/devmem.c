/* SPDX-License-Identifier: MIT */
/*
 * Device memory TCP at the socket (docs/devmem.md): recvmsg with
 * MSG_SOCK_DEVMEM (fragments as SCM_DEVMEM_DMABUF, plain bytes as
 * SCM_DEVMEM_LINEAR), SO_DEVMEM_DONTNEED, sendmsg with MSG_ZEROCOPY (from a
 * tx binding named by SCM_DEVMEM_DMABUF, or from ordinary buffers) and its
 * completions on MSG_ERRQUEUE.  The kernel's API and errors, on a
 * connection of ours; a connection on kernel TCP gets the kernel's.
 */
#include <errno.h>
#include <limits.h>
#include <time.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "devmem.h"
#include "devmem_uapi.h"
#include "interposer.h"
#include "txrx.h"

#define DM_CMSG_SPACE CMSG_SPACE(sizeof(struct sc_dmabuf_cmsg))

/* ---- receive -------------------------------------------------------------- */

/* Fill m's control buffer: the linear bytes' cmsg, then one per fragment. */
static void dm_cmsgs(struct msghdr *m, size_t linear, const struct sc_dm_frag *fr, int n)
{
	size_t used = 0;
	char *p = m->msg_control;
	if (linear) {
		struct cmsghdr *cm = (struct cmsghdr *)p;
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_DEVMEM_LINEAR;
		cm->cmsg_len = CMSG_LEN(sizeof(struct sc_dmabuf_cmsg));
		struct sc_dmabuf_cmsg d = { .frag_size = (__u32)linear };
		memcpy(CMSG_DATA(cm), &d, sizeof(d));
		p += DM_CMSG_SPACE;
		used += DM_CMSG_SPACE;
	}
	for (int i = 0; i < n; i++) {
		struct cmsghdr *cm = (struct cmsghdr *)p;
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_DEVMEM_DMABUF;
		cm->cmsg_len = CMSG_LEN(sizeof(struct sc_dmabuf_cmsg));
		struct sc_dmabuf_cmsg d = { .frag_offset = fr[i].offset, .frag_size = fr[i].size,
					    .frag_token = fr[i].token, .dmabuf_id = fr[i].id };
		memcpy(CMSG_DATA(cm), &d, sizeof(d));
		p += DM_CMSG_SPACE;
		used += DM_CMSG_SPACE;
	}
	m->msg_controllen = used;
}

/* The devmem receive itself: up to max fragments into fr (*n) and the
 * linear bytes into m's iov (*lin), within SO_RCVTIMEO (polled here, as
 * the kernel's socket timeout).  Bytes, or -errno. */
static ssize_t dm_recv_timed(struct sc_sock *s, struct sc_dm_rx *rx, struct msghdr *m, int flags,
			     struct sc_dm_frag *fr, int max, int *n, size_t *lin)
{
	int f = (s->nonblock || (flags & MSG_DONTWAIT)) ? SC_NONBLOCK : 0;
	if (flags & MSG_WAITALL)
		f |= SC_WAITALL;
	uint64_t to = s->rcvtimeo_ns;
	uint64_t deadline = to ? sc__now_ns() + to : UINT64_MAX;
	for (;;) {
		ssize_t rc = sc__recv_devmem(s->c, rx, m->msg_iov, (int)m->msg_iovlen, fr, max, n,
					     lin, to ? f | SC_NONBLOCK : f);
		if (rc != -EAGAIN || !to || (f & SC_NONBLOCK))
			return rc;
		int w = sc__conn_wait_ready(s->c, false, deadline);
		if (w == -ETIMEDOUT)
			return rc;
		if (w < 0)
			return w;
	}
}

/* A receive with MSG_SOCK_DEVMEM on an accelerated socket: the bytes,
 * -errno, or NOT_MINE: not ours to answer (kernel TCP, no rx binding in
 * the process: the kernel then copies, as it does for data on no bound
 * queue). */
ssize_t dm_recvmsg(int fd, struct sc_sock *s, struct msghdr *m, int flags)
{
	if (sock_route(fd, s) == RT_PENDING) {
		pthread_mutex_lock(&s->lock);
		int rc = pending_settle(fd, s, !(s->nonblock || (flags & MSG_DONTWAIT)), -1);
		pthread_mutex_unlock(&s->lock);
		if (rc == -EAGAIN)
			return -EAGAIN;
	}
	if (sock_where(s) != RT_SHM)
		return NOT_MINE;
	pthread_mutex_lock(&s->lock);
	if (!s->dmrx && sc__dm_rx_new(&s->dmrx) < 0)
		s->dmrx = NULL;
	struct sc_dm_rx *rx = s->dmrx;
	pthread_mutex_unlock(&s->lock);
	if (!rx)
		return NOT_MINE;
	if (m->msg_iovlen > IOV_MAX || (flags & (MSG_PEEK | MSG_OOB | MSG_ERRQUEUE)))
		return -EINVAL;
	/* fragments that fit the control buffer (it is not truncated: the
	 * linear cmsg's room is kept) */
	size_t cap = m->msg_control ? m->msg_controllen : 0;
	int max = cap >= 2 * DM_CMSG_SPACE ? (int)((cap - DM_CMSG_SPACE) / DM_CMSG_SPACE) : 0;
	if (max < 1)
		return -EFAULT;
	if (max > 1024)
		max = 1024;
	struct sc_dm_frag fr[1024];
	int n = 0;
	size_t lin = 0;
	ssize_t rc = dm_recv_timed(s, rx, m, flags, fr, max, &n, &lin);
	if (rc == -SC_ESWITCHED) {
		/* back to TCP: the kernel's from here (its loopback copies);
		 * the fragments the program holds stay valid */
		return sock_switch(fd, s) < 0 ? -ENOTCONN : NOT_MINE;
	}
	if (rc == -ECONNRESET) {
		if (s->err_reported)
			rc = 0;
		s->err_reported = true;
	}
	if (rc < 0)
		return rc;
	dm_cmsgs(m, lin, fr, n);
	m->msg_flags = 0;
	m->msg_namelen = 0;
	if (s->rec)
		rec_add(&s->rec->bytes_received, rc);
	return rc;
}

/* setsockopt(SO_DEVMEM_DONTNEED): the number of fragments freed, -errno,
 * or NOT_MINE if the socket never received fragments of ours. */
int dm_dontneed(struct sc_sock *s, const void *val, socklen_t len)
{
	if (!s->dmrx)
		return NOT_MINE;
	if (!val || len == 0 || len % sizeof(struct sc_dmabuf_token) ||
	    len > SC_DONTNEED_MAX_TOKENS * sizeof(struct sc_dmabuf_token))
		return -EINVAL;
	int n = (int)(len / sizeof(struct sc_dmabuf_token));
	struct sc_dm_token t[SC_DONTNEED_MAX_TOKENS];
	memcpy(t, val, len);    /* (the same layout: two __u32) */
	int freed = sc__dm_release(s->dmrx, t, n, SC_DONTNEED_MAX_FRAGS);
	if (freed && sock_where(s) == RT_SHM && s->c)
		sc__dm_space_freed(s->c);       /* a sender waiting for a chunk */
	return freed;
}

/* ---- transmit -------------------------------------------------------------- */

/* A zerocopy send of ours completed (at once: its bytes were copied): one
 * more id in the error queue's ranges (s->lock held). */
static void zc_complete(struct sc_sock *s, uint8_t code)
{
	uint32_t id = s->zc_next++;
	if (s->nzc && s->zc[s->nzc - 1].hi + 1 == id && s->zc[s->nzc - 1].code == code) {
		s->zc[s->nzc - 1].hi = id;
		return;
	}
	if (s->nzc == SC_ZC_RANGES) {   /* full: the oldest two merge */
		s->zc[1].lo = s->zc[0].lo;
		memmove(&s->zc[0], &s->zc[1], (SC_ZC_RANGES - 1) * sizeof(s->zc[0]));
		s->nzc--;
	}
	s->zc[s->nzc++] = (struct sc_zc_range){ .lo = id, .hi = id, .code = code };
}

/* sendmsg on an accelerated socket with MSG_ZEROCOPY or a devmem cmsg:
 * the bytes sent, -errno, or NOT_MINE: the usual path. */
ssize_t dm_sendmsg(int fd, struct sc_sock *s, const struct msghdr *m, int flags)
{
	int id = -1, others = 0;
	if (m->msg_control && m->msg_controllen) {
		struct msghdr *mm = (struct msghdr *)m;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(mm); cm; cm = CMSG_NXTHDR(mm, cm)) {
			size_t room = m->msg_controllen - (size_t)((char *)cm - (char *)m->msg_control);
			if (cm->cmsg_len < CMSG_LEN(0) || cm->cmsg_len > room)
				return NOT_MINE;        /* the kernel's EINVAL */
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_DEVMEM_DMABUF &&
			    cm->cmsg_len == CMSG_LEN(sizeof(__u32)))
				memcpy(&id, CMSG_DATA(cm), sizeof(__u32));
			else
				others++;
		}
	}
	if (others || (id < 0 && !(flags & MSG_ZEROCOPY)))
		return NOT_MINE;
	if (m->msg_iovlen > IOV_MAX)
		return -EMSGSIZE;
	bool zc = (flags & MSG_ZEROCOPY) && s->zerocopy;
	const struct iovec *iov = m->msg_iov;
	struct iovec tiov[IOV_MAX];
	if (id >= 0) {
		/* devmem: iov_base is an offset into the tx binding's region */
		const uint8_t *base;
		size_t size;
		if (!zc || sc__dm_tx_region((uint32_t)id, &base, &size) < 0)
			return -EINVAL;
		for (size_t i = 0; i < m->msg_iovlen; i++) {
			uintptr_t off = (uintptr_t)m->msg_iov[i].iov_base;
			size_t l = m->msg_iov[i].iov_len;
			if (off > size || l > size - off)
				return -EFAULT;
			tiov[i] = (struct iovec){ (void *)(base + off), l };
		}
		iov = tiov;
	}
	ssize_t n = sock_sendv(fd, s, iov, (int)m->msg_iovlen, flags & ~MSG_ZEROCOPY);
	if (n < 0)
		return -errno;
	if (n > 0 && zc) {
		pthread_mutex_lock(&s->lock);
		/* the payload went from its buffer (a region, or the program's
		 * memory) by one copy: ours is the device's DMA for devmem,
		 * and "copied" for an ordinary buffer, as the kernel says of
		 * loopback */
		zc_complete(s, id >= 0 ? 0 : SO_EE_CODE_ZEROCOPY_COPIED);
		pthread_mutex_unlock(&s->lock);
	}
	return n;
}

/* Completions queued (POLLERR). */
bool dm_errqueue_pending(struct sc_sock *s)
{
	return s->nzc != 0;
}

/* recvmsg(MSG_ERRQUEUE): one completion range of ours (0), or NOT_MINE
 * if there is none (the kernel's queue then). */
ssize_t dm_errqueue(int fd, struct sc_sock *s, struct msghdr *m)
{
	pthread_mutex_lock(&s->lock);
	if (!s->nzc) {
		pthread_mutex_unlock(&s->lock);
		return NOT_MINE;
	}
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	bool v6 = getsockname(fd, (struct sockaddr *)&me, &ml) == 0 && me.ss_family == AF_INET6;
	struct {
		struct sock_extended_err e;
		struct sockaddr_in6 offender;   /* (zeroed, as the kernel's) */
	} d = { 0 };
	size_t dlen = sizeof(d.e) + (v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	d.e.ee_origin = SO_EE_ORIGIN_ZEROCOPY;
	d.e.ee_code = s->zc[0].code;
	d.e.ee_info = s->zc[0].lo;
	d.e.ee_data = s->zc[0].hi;
	m->msg_flags = MSG_ERRQUEUE;
	if (!m->msg_control || m->msg_controllen < CMSG_SPACE(dlen)) {
		m->msg_flags |= MSG_CTRUNC;
		m->msg_controllen = 0;
	} else {
		struct cmsghdr *cm = (struct cmsghdr *)m->msg_control;
		cm->cmsg_level = v6 ? SOL_IPV6 : SOL_IP;
		cm->cmsg_type = v6 ? IPV6_RECVERR : IP_RECVERR;
		cm->cmsg_len = CMSG_LEN(dlen);
		memcpy(CMSG_DATA(cm), &d, dlen);
		m->msg_controllen = CMSG_SPACE(dlen);
	}
	/* taken (the kernel dequeues it even when the cmsg is truncated) */
	memmove(&s->zc[0], &s->zc[1], (size_t)(s->nzc - 1) * sizeof(s->zc[0]));
	s->nzc--;
	pthread_mutex_unlock(&s->lock);
	m->msg_namelen = 0;
	return 0;
}

/* The socket's last fd closed: its fragments are freed, as the kernel's
 * are at close. */
void dm_sock_release(struct sc_sock *s)
{
	if (!s->dmrx)
		return;
	if (s->c && sock_where(s) == RT_SHM)
		sc__dm_rx_end(s->c, s->dmrx);   /* chunks taken and never handed out */
	sc__dm_rx_free(s->dmrx);
	s->dmrx = NULL;
}
