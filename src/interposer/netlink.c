/* SPDX-License-Identifier: MIT */
/*
 * Device-memory bindings through the kernel's own API: the generic netlink
 * family "netdev", commands bind-rx and bind-tx, on the loopback device's
 * ifindex (which the kernel cannot bind: "loopback is not functional").
 * We answer those two ourselves; family look-up and everything else is the
 * kernel's.  Closing the netlink socket unbinds, as in the kernel.
 *
 * How a reply reaches the program through a kernel socket: in place of
 * each message we answer, the kernel gets a decoy (NLMSG_NOOP asking for
 * an ACK, marked with our nlmsg_pid) in the same position of the same
 * send.  Each decoy's ACK makes the socket readable exactly when the
 * kernel's own reply would have (poll, epoll and blocking reads as they
 * are), and a receive hands the program our next queued message in its
 * place.  Programs built on YNL and on raw genetlink both work.
 */
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "devmem.h"
#include "devmem_uapi.h"
#include "interposer.h"
#include "forkreset.h"

#define DECOY_PID 0x5c0de5c0u
#define NL_BUF 65536

struct nl_reply {
	struct nl_reply *next;
	size_t len;
	char msg[];
};

struct nl_sock {
	int fd;
	struct nl_reply *head, *tail;   /* our messages, one per decoy sent */
	uint32_t ids[16];               /* bindings made through it */
	int nids;
	struct nl_sock *next;
};

/* guards nls, each one's replies and ids; order: docs/interposer.md §6b */
static pthread_mutex_t nl_lock = PTHREAD_MUTEX_INITIALIZER;
SC_LOCK_RANK(nl_lock, LO_NL)
static struct nl_sock *nls;
_Atomic int nl_count;           /* tracked netlink sockets (fast path: 0) */
static int netdev_family = -1;  /* resolved on first need; 0: none */

/* nl_lock held */
static struct nl_sock *nl_find(int fd)
{
	for (struct nl_sock *n = nls; n; n = n->next)
		if (n->fd == fd)
			return n;
	return NULL;
}

/* socket(AF_NETLINK, *, NETLINK_GENERIC) made fd */
void nl_track(int fd)
{
	struct nl_sock *n = calloc(1, sizeof(*n));
	if (!n)
		return;
	n->fd = fd;
	pthread_mutex_lock(&nl_lock);
	n->next = nls;
	nls = n;
	/* relaxed: read relaxed (nl_fd: a fast path) */
	atomic_fetch_add_explicit(&nl_count, 1, memory_order_relaxed);
	pthread_mutex_unlock(&nl_lock);
}

/* fd is closed: its bindings go (the kernel unbinds when the netlink
 * socket is released), its queued replies too */
void nl_close(int fd)
{
	pthread_mutex_lock(&nl_lock);
	struct nl_sock **pp = &nls, *n;
	while ((n = *pp) && n->fd != fd)
		pp = &n->next;
	if (n) {
		*pp = n->next;
		atomic_fetch_sub_explicit(&nl_count, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&nl_lock);
	if (!n)
		return;
	for (int i = 0; i < n->nids; i++)
		sc__dm_unbind(n->ids[i]);
	while (n->head) {
		struct nl_reply *r = n->head;
		n->head = r->next;
		free(r);
	}
	free(n);
}

void nl_atfork_child(void)
{
	/* the bindings are the parent's (sc__dm_atfork_child) */
	sc__mutex_reset(&nl_lock);
	SC_RESET(nls, NULL);
	SC_RESET_ATOMIC(nl_count, 0);
}

bool nl_tracked(int fd)
{
	if (!atomic_load_explicit(&nl_count, memory_order_relaxed))
		return false;
	pthread_mutex_lock(&nl_lock);
	bool t = nl_find(fd) != NULL;
	pthread_mutex_unlock(&nl_lock);
	return t;
}

/* ---- the netdev family's id (CTRL_CMD_GETFAMILY, on a socket of ours) ---- */

static int resolve_family(void)
{
	int s = R(socket)(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (s < 0)
		return 0;
	struct {
		struct nlmsghdr h;
		struct genlmsghdr g;
		struct nlattr a;
		char name[8];
	} req = { .h = { .nlmsg_len = sizeof(req), .nlmsg_type = GENL_ID_CTRL,
			 .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
		  .g = { .cmd = CTRL_CMD_GETFAMILY, .version = 1 },
		  .a = { .nla_len = NLA_HDRLEN + 7, .nla_type = CTRL_ATTR_FAMILY_NAME },
		  .name = "netdev" };
	int id = 0;
	char buf[8192];
	if (R(send)(s, &req, sizeof(req), 0) == (ssize_t)sizeof(req)) {
		ssize_t n = R(recv)(s, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;
		if (n >= (ssize_t)NLMSG_HDRLEN && NLMSG_OK(h, (size_t)n) &&
		    h->nlmsg_type == GENL_ID_CTRL) {
			char *p = (char *)NLMSG_DATA(h) + GENL_HDRLEN;
			char *end = (char *)h + h->nlmsg_len;
			while (p + NLA_HDRLEN <= end) {
				struct nlattr *a = (struct nlattr *)p;
				if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end)
					break;
				if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID &&
				    a->nla_len >= NLA_HDRLEN + 2)
					id = *(uint16_t *)(p + NLA_HDRLEN);
				p += NLA_ALIGN(a->nla_len);
			}
		}
	}
	R(close)(s);
	return id;
}

static int family(void)
{
	if (netdev_family < 0) {
		KEEP_ERRNO();
		netdev_family = resolve_family();
	}
	return netdev_family;
}

/* ---- our answers -------------------------------------------------------- */

/* nl_lock held: one message for the program, in the position of a decoy */
static void queue(struct nl_sock *n, const void *msg, size_t len)
{
	struct nl_reply *r = malloc(sizeof(*r) + len);
	if (!r)
		return;         /* the program gets the decoy's plain ACK */
	r->next = NULL;
	r->len = len;
	memcpy(r->msg, msg, len);
	if (n->tail)
		n->tail->next = r;
	else
		n->head = r;
	n->tail = r;
}

static bool cap_ack(int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);
	return R(getsockopt)(fd, SOL_NETLINK, NETLINK_CAP_ACK, &v, &l) == 0 && v;
}

/* nl_lock held: an ACK (err 0) or an error for request h, as the kernel's
 * netlink_ack: the request's header (and, without NETLINK_CAP_ACK, its
 * payload) echoed */
static void queue_ack(struct nl_sock *n, const struct nlmsghdr *h, int err)
{
	bool capped = cap_ack(n->fd);
	size_t echo = capped ? sizeof(*h) : h->nlmsg_len;
	size_t len = NLMSG_HDRLEN + sizeof(int) + echo;
	char *m = calloc(1, NLMSG_ALIGN(len));
	if (!m)
		return;
	struct nlmsghdr *r = (struct nlmsghdr *)m;
	r->nlmsg_len = (uint32_t)len;
	r->nlmsg_type = NLMSG_ERROR;
	r->nlmsg_flags = capped ? NLM_F_CAPPED : 0;
	r->nlmsg_seq = h->nlmsg_seq;
	r->nlmsg_pid = h->nlmsg_pid;
	struct nlmsgerr *e = NLMSG_DATA(r);
	e->error = err;
	memcpy(&e->msg, h, echo);
	queue(n, m, NLMSG_ALIGN(len));
	free(m);
}

/* nl_lock held: the reply of a bind (its id) */
static void queue_reply(struct nl_sock *n, const struct nlmsghdr *h, uint8_t cmd, uint32_t id)
{
	struct {
		struct nlmsghdr h;
		struct genlmsghdr g;
		struct nlattr a;
		uint32_t id;
	} r = { .h = { .nlmsg_len = sizeof(r), .nlmsg_type = h->nlmsg_type,
		       .nlmsg_seq = h->nlmsg_seq, .nlmsg_pid = h->nlmsg_pid },
		.g = { .cmd = cmd, .version = 1 },
		.a = { .nla_len = NLA_HDRLEN + 4, .nla_type = SC_NETDEV_A_DMABUF_ID }, .id = id };
	queue(n, &r, sizeof(r));
}

static uint32_t lo_ifindex(void)
{
	static _Atomic uint32_t lo;
	uint32_t v = atomic_load_explicit(&lo, memory_order_relaxed);
	if (!v) {
		KEEP_ERRNO();
		v = if_nametoindex("lo");
		atomic_store_explicit(&lo, v, memory_order_relaxed);
	}
	return v;
}

/* A bind request for the loopback device: -errno, or the binding's id;
 * 0 if it is not ours to answer (another device: the kernel's). */
static int do_bind(const struct nlmsghdr *h, uint8_t cmd)
{
	const char *p = (const char *)NLMSG_DATA(h) + GENL_HDRLEN;
	const char *end = (const char *)h + h->nlmsg_len;
	int64_t ifindex = -1, fd = -1;
	int nqueues = 0, bad_queue = 0;
	while (p + NLA_HDRLEN <= end) {
		const struct nlattr *a = (const struct nlattr *)p;
		if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end)
			return -EINVAL;
		int type = a->nla_type & NLA_TYPE_MASK;
		uint16_t plen = a->nla_len - NLA_HDRLEN;
		const char *v = p + NLA_HDRLEN;
		if (type == SC_NETDEV_A_DMABUF_IFINDEX && plen >= 4)
			ifindex = *(const uint32_t *)v;
		else if (type == SC_NETDEV_A_DMABUF_FD && plen >= 4)
			fd = *(const uint32_t *)v;
		else if (type == SC_NETDEV_A_DMABUF_QUEUES) {
			/* {id, type}: both needed; loopback has one rx queue */
			int64_t qid = -1, qtype = -1;
			const char *q = v, *qend = v + plen;
			while (q + NLA_HDRLEN <= qend) {
				const struct nlattr *b = (const struct nlattr *)q;
				if (b->nla_len < NLA_HDRLEN || q + b->nla_len > qend)
					return -EINVAL;
				int t = b->nla_type & NLA_TYPE_MASK;
				if (t == SC_NETDEV_A_QUEUE_ID && b->nla_len >= NLA_HDRLEN + 4)
					qid = *(const uint32_t *)(q + NLA_HDRLEN);
				else if (t == SC_NETDEV_A_QUEUE_TYPE && b->nla_len >= NLA_HDRLEN + 4)
					qtype = *(const uint32_t *)(q + NLA_HDRLEN);
				q += NLA_ALIGN(b->nla_len);
			}
			if (qid < 0 || qtype < 0)
				bad_queue = bad_queue ? bad_queue : -EINVAL;
			else if (qtype != SC_NETDEV_QUEUE_TYPE_RX)
				bad_queue = bad_queue ? bad_queue : -EINVAL;
			else if (qid != 0)
				bad_queue = bad_queue ? bad_queue : -ERANGE;
			nqueues++;
		}
		p += NLA_ALIGN(a->nla_len);
	}
	if (ifindex < 0 || ifindex != lo_ifindex())
		return ifindex < 0 ? -EINVAL : 0;
	if (fd < 0)
		return -EINVAL;
	if (cmd == NETDEV_CMD_BIND_RX) {
		if (!nqueues)
			return -EINVAL;
		if (bad_queue)
			return bad_queue;
		/* loopback's one rx queue, bound already? */
		struct sc_dm_rx *probe;
		if (sc__dm_rx_new(&probe) == 0) {
			sc__dm_rx_free(probe);
			return -EEXIST;
		}
	}
	int id = sc__dm_bind((int)fd, cmd == NETDEV_CMD_BIND_RX ? SC_DM_RX : SC_DM_TX);
	return id;
}

/* The message's bytes in one buffer (*total), or NULL (none we could
 * answer: too short or too long for a request of ours, no memory). */
static char *iov_flat(const struct msghdr *m, size_t *total)
{
	size_t len = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		len += m->msg_iov[i].iov_len;
	if (len < NLMSG_HDRLEN || len > NL_BUF)
		return NULL;
	char *buf = malloc(len);
	if (!buf)
		return NULL;
	size_t off = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++) {
		memcpy(buf + off, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len);
		off += m->msg_iov[i].iov_len;
	}
	*total = len;
	return buf;
}

/* The netdev command of h (0: none). */
static uint8_t genl_cmd(const struct nlmsghdr *h)
{
	return h->nlmsg_len >= NLMSG_LENGTH(GENL_HDRLEN) ?
	       ((const struct genlmsghdr *)NLMSG_DATA(h))->cmd : 0;
}

/* Any bind (rx or tx) of family fam among the messages? */
static bool any_bind(char *buf, size_t rem, int fam)
{
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, rem); h = NLMSG_NEXT(h, rem))
		if (h->nlmsg_type == fam &&
		    (genl_cmd(h) == NETDEV_CMD_BIND_RX || genl_cmd(h) == NETDEV_CMD_BIND_TX))
			return true;
	return false;
}

/* A bind we answered (id: the binding, or -errno): its reply and ack
 * queued on n.  Returns how many messages the program will read. */
static int bind_answer(struct nl_sock *n, struct nlmsghdr *h, uint8_t cmd, int id)
{
	if (id < 0) {
		queue_ack(n, h, id);
		return 1;
	}
	if (n->nids < 16)
		n->ids[n->nids++] = (uint32_t)id;
	queue_reply(n, h, cmd, (uint32_t)id);
	if (!(h->nlmsg_flags & NLM_F_ACK))
		return 1;
	queue_ack(n, h, 0);
	return 2;
}

/* For each answer of ours, a decoy the kernel answers with an ack the
 * receive drops (the program's read then finds ours in its place). */
static void decoys_add(char **out, size_t *olen, size_t *cap, const struct nlmsghdr *h,
		       int replies)
{
	for (int k = 0; k < replies; k++) {
		struct nlmsghdr d = { .nlmsg_len = NLMSG_HDRLEN, .nlmsg_type = NLMSG_NOOP,
				      .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK,
				      .nlmsg_seq = h->nlmsg_seq, .nlmsg_pid = DECOY_PID };
		if (*olen + sizeof(d) > *cap) {
			char *bigger = realloc(*out, *olen + sizeof(d) + *cap);
			if (!bigger)
				return;
			*out = bigger;
			*cap = *olen + sizeof(d) + *cap;
		}
		memcpy(*out + *olen, &d, sizeof(d));
		*olen += sizeof(d);
	}
}

/*
 * A send on a tracked netlink socket: the messages we answer become
 * decoys, the rest goes to the kernel as it was, in one send: the
 * program's length, -errno, or NOT_MINE: nothing of ours in it (sent as
 * it is by the caller).
 */
ssize_t nl_sendmsg(int fd, const struct msghdr *m, int flags)
{
	int fam = family();
	size_t total = 0;
	char *buf = fam > 0 ? iov_flat(m, &total) : NULL;
	if (!buf || !any_bind(buf, total, fam)) {
		free(buf);
		return NOT_MINE;
	}
	size_t cap = total, olen = 0;
	char *out = malloc(cap);
	if (!out) {
		free(buf);
		return -ENOBUFS;
	}
	pthread_mutex_lock(&nl_lock);
	struct nl_sock *n = nl_find(fd);
	size_t left = total;
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, left);
	     h = NLMSG_NEXT(h, left)) {
		uint8_t cmd = genl_cmd(h);
		int id = 0;
		if (n && h->nlmsg_type == fam && (h->nlmsg_flags & NLM_F_REQUEST) &&
		    (cmd == NETDEV_CMD_BIND_RX || cmd == NETDEV_CMD_BIND_TX))
			id = do_bind(h, cmd);
		if (id != 0) {
			decoys_add(&out, &olen, &cap, h, bind_answer(n, h, cmd, id));
			continue;
		}
		size_t hl = NLMSG_ALIGN(h->nlmsg_len) < left ? NLMSG_ALIGN(h->nlmsg_len) : h->nlmsg_len;
		memcpy(out + olen, h, hl);      /* (the kernel's to answer) */
		olen += hl;
	}
	pthread_mutex_unlock(&nl_lock);
	struct iovec v = { out, olen };
	struct msghdr km = *m;
	km.msg_iov = &v;
	km.msg_iovlen = 1;
	ssize_t rc = R(sendmsg)(fd, &km, flags) < 0 ? -errno : 0;
	free(out);
	free(buf);
	return rc < 0 ? rc : (ssize_t)total;    /* the program's length */
}

/* Is the datagram one of our decoys' ACKs? */
static bool is_decoy(const char *p, size_t len)
{
	const struct nlmsghdr *h = (const struct nlmsghdr *)p;
	if (len < NLMSG_LENGTH(sizeof(struct nlmsgerr)) || !NLMSG_OK(h, len) ||
	    h->nlmsg_type != NLMSG_ERROR)
		return false;
	const struct nlmsgerr *e = NLMSG_DATA(h);
	return e->error == 0 && e->msg.nlmsg_type == NLMSG_NOOP && e->msg.nlmsg_pid == DECOY_PID;
}

/*
 * A receive on a tracked netlink socket: the kernel's datagram, or in
 * place of a decoy's ACK our next message: its length, -errno, or
 * NOT_MINE: nothing queued (the caller's plain receive).
 */
ssize_t nl_recvmsg(int fd, struct msghdr *m, int flags)
{
	pthread_mutex_lock(&nl_lock);
	struct nl_sock *n = nl_find(fd);
	bool queued = n && n->head;
	pthread_mutex_unlock(&nl_lock);
	if (!queued)
		return NOT_MINE;
	char *buf = malloc(NL_BUF);
	if (!buf)
		return -ENOBUFS;
	struct iovec v = { buf, NL_BUF };
	struct msghdr km = *m;
	km.msg_iov = &v;
	km.msg_iovlen = 1;
	ssize_t k = R(recvmsg)(fd, &km, (flags & ~MSG_TRUNC) | MSG_PEEK);
	if (k < 0) {
		k = -errno;
		free(buf);
		return k;
	}
	const char *src = buf;
	size_t len = (size_t)k;
	struct nl_reply *r = NULL;
	if (is_decoy(buf, len)) {
		pthread_mutex_lock(&nl_lock);
		n = nl_find(fd);
		if (n && (r = n->head) && !(flags & MSG_PEEK)) {
			n->head = r->next;
			if (!n->head)
				n->tail = NULL;
		}
		pthread_mutex_unlock(&nl_lock);
		if (r) {
			src = r->msg;
			len = r->len;
		}
	}
	if (!(flags & MSG_PEEK)) {
		/* now take the kernel's datagram (peeked above) */
		char tiny;
		struct iovec tv = { &tiny, 1 };
		struct msghdr tm = { .msg_iov = &tv, .msg_iovlen = 1 };
		R(recvmsg)(fd, &tm, flags & ~(MSG_PEEK | MSG_TRUNC));
	}
	/* into the program's buffers, truncated as a datagram */
	size_t off = 0;
	for (size_t i = 0; i < m->msg_iovlen && off < len; i++) {
		size_t l = m->msg_iov[i].iov_len < len - off ? m->msg_iov[i].iov_len : len - off;
		memcpy(m->msg_iov[i].iov_base, src + off, l);
		off += l;
	}
	m->msg_namelen = km.msg_namelen;
	m->msg_controllen = km.msg_controllen;
	m->msg_flags = km.msg_flags & ~MSG_TRUNC;
	if (off < len)
		m->msg_flags |= MSG_TRUNC;
	ssize_t rc = (flags & MSG_TRUNC) ? (ssize_t)len : (ssize_t)off;
	if (r && !(flags & MSG_PEEK))
		free(r);
	free(buf);
	return rc;
}
