/* SPDX-License-Identifier: MIT */
/*
 * A devmem TCP validator in the spirit of the kernel's ncdevmem selftest,
 * written against the kernel's API only (raw generic netlink, recvmsg with
 * MSG_SOCK_DEVMEM, SO_DEVMEM_DONTNEED, MSG_ZEROCOPY from a tx binding):
 * under `shortcut run` on loopback it works, on the kernel's loopback the
 * bind fails (devmem needs a NIC with header split).
 *
 *   devmem_nc server [--pages N] [--bind netlink|api] [--hold] [--check-id]
 *       binds an N-page memfd (F_SEAL_SHRINK, as ncdevmem) for rx, listens
 *       on 127.0.0.1:0, prints "port P", accepts one connection and
 *       receives with devmem until EOF, checking every byte of every
 *       fragment (and of the linear part) against the pattern, returning
 *       each token singly (setsockopt must return 1).  --hold: keep every
 *       token until every chunk of the region is held (the region is full:
 *       the sender waits), then return them all (the count each call
 *       returns must be theirs) and go on.  Prints
 *       "server ok bytes=B frags=F linear=L held_max=H".
 *   devmem_nc client PORT BYTES [--tx] [--seed S] [--pause-at B]
 *       sends BYTES of the pattern in random sizes (1 B .. 1.5 MiB); --tx
 *       from a tx-bound memfd with MSG_ZEROCOPY + SCM_DEVMEM_DMABUF, each
 *       send's completion awaited (poll POLLERR, MSG_ERRQUEUE) and checked.
 *       --pause-at: after B bytes print "paused B" and wait for a line on
 *       stdin.  Prints "client ok bytes=B sends=N completions=C".
 *
 * Pattern (ncdevmem's -v): byte i is i % V + 1, or '\n' where i % V is
 * V - 1; V = 251.  Exit 0 only if everything checked.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef MSG_SOCK_DEVMEM
#define MSG_SOCK_DEVMEM 0x2000000
#endif
#ifndef SCM_DEVMEM_LINEAR
#define SCM_DEVMEM_LINEAR 78
#endif
#ifndef SCM_DEVMEM_DMABUF
#define SCM_DEVMEM_DMABUF 79
#endif
#ifndef SO_DEVMEM_DONTNEED
#define SO_DEVMEM_DONTNEED 80
#endif
struct dm_cmsg {
	uint64_t frag_offset;
	uint32_t frag_size, frag_token, dmabuf_id, flags;
};
struct dm_token {
	uint32_t token_start, token_count;
};

#define V 251
static unsigned char pat(uint64_t i)
{
	uint64_t k = i % V;
	return k == V - 1 ? '\n' : (unsigned char)(k + 1);
}

static void die(const char *what)
{
	fprintf(stderr, "devmem_nc: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "devmem_nc: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* ---- generic netlink, raw ---------------------------------------------------- */

static int nl_family(int s, const char *name)
{
	char buf[8192];
	struct {
		struct nlmsghdr h;
		struct genlmsghdr g;
		struct nlattr a;
		char name[16];
	} req = { .h = { .nlmsg_type = GENL_ID_CTRL, .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
		  .g = { .cmd = CTRL_CMD_GETFAMILY, .version = 1 },
		  .a = { .nla_type = CTRL_ATTR_FAMILY_NAME } };
	req.a.nla_len = (uint16_t)(NLA_HDRLEN + strlen(name) + 1);
	strcpy(req.name, name);
	req.h.nlmsg_len = (uint32_t)(NLMSG_HDRLEN + GENL_HDRLEN + NLA_ALIGN(req.a.nla_len));
	if (send(s, &req, req.h.nlmsg_len, 0) < 0)
		die("send getfamily");
	ssize_t n = recv(s, buf, sizeof(buf), 0);
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (n < 0 || !NLMSG_OK(h, (size_t)n) || h->nlmsg_type != GENL_ID_CTRL)
		return -1;
	char *p = (char *)NLMSG_DATA(h) + GENL_HDRLEN, *end = buf + h->nlmsg_len;
	while (p + NLA_HDRLEN <= end) {
		struct nlattr *a = (struct nlattr *)p;
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
			return *(uint16_t *)(p + NLA_HDRLEN);
		p += NLA_ALIGN(a->nla_len);
	}
	return -1;
}

static char *put_u32(char *p, uint16_t type, uint32_t v)
{
	struct nlattr *a = (struct nlattr *)p;
	a->nla_len = NLA_HDRLEN + 4;
	a->nla_type = type;
	memcpy(p + NLA_HDRLEN, &v, 4);
	return p + NLA_ALIGN(a->nla_len);
}

/* bind-rx (13) or bind-tx (15) of dmabuf fd on ifindex, queue 0 for rx;
 * returns the id, or -errno from the kernel's (or shortcut's) answer.
 * The netlink socket stays open (*nls): closing it unbinds. */
int nl_bind(int *nls, int cmd, unsigned ifindex, int dmfd, int nqueues, int qtype, int qid)
{
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (s < 0)
		die("netlink socket");
	int one = 1;
	setsockopt(s, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	int fam = nl_family(s, "netdev");
	if (fam < 0)
		fail("no netdev family");
	char req[256] = { 0 };
	struct nlmsghdr *h = (struct nlmsghdr *)req;
	h->nlmsg_type = (uint16_t)fam;
	h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	h->nlmsg_seq = 2;
	struct genlmsghdr *g = NLMSG_DATA(h);
	g->cmd = (uint8_t)cmd;
	g->version = 1;
	char *p = (char *)g + GENL_HDRLEN;
	p = put_u32(p, 1, ifindex);                     /* ifindex */
	p = put_u32(p, 3, (uint32_t)dmfd);              /* fd */
	for (int q = 0; q < nqueues; q++) {             /* queues: {id, type} */
		struct nlattr *nest = (struct nlattr *)p;
		nest->nla_type = 2 | NLA_F_NESTED;
		char *e = put_u32(p + NLA_HDRLEN, 1, (uint32_t)qid);
		e = put_u32(e, 3, (uint32_t)qtype);
		nest->nla_len = (uint16_t)(e - p);
		p = e;
	}
	h->nlmsg_len = (uint32_t)(p - req);
	if (send(s, req, h->nlmsg_len, 0) < 0)
		die("send bind");
	int id = 0, err = 1;
	char buf[8192];
	while (err > 0) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		if (n < 0)
			die("recv bind");
		for (struct nlmsghdr *r = (struct nlmsghdr *)buf; NLMSG_OK(r, (size_t)n);
		     r = NLMSG_NEXT(r, n)) {
			if (r->nlmsg_type == NLMSG_ERROR) {
				err = ((struct nlmsgerr *)NLMSG_DATA(r))->error;
				if (err > 0)
					err = -EPROTO;
				break;
			}
			if (r->nlmsg_type != fam || r->nlmsg_seq != 2)
				continue;
			char *q = (char *)NLMSG_DATA(r) + GENL_HDRLEN, *end = (char *)r + r->nlmsg_len;
			while (q + NLA_HDRLEN <= end) {
				struct nlattr *a = (struct nlattr *)q;
				if ((a->nla_type & NLA_TYPE_MASK) == 4)
					memcpy(&id, q + NLA_HDRLEN, 4);
				q += NLA_ALIGN(a->nla_len);
			}
		}
	}
	*nls = s;
	return err ? err : id;
}

/* ---- memory -------------------------------------------------------------- */

static int region(size_t size, unsigned char **map)
{
	int fd = memfd_create("devmem", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if (fd < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0 || ftruncate(fd, (off_t)size) < 0)
		die("memfd");
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED)
		die("mmap");
	return fd;
}

static int bind_api(int fd, int rx)
{
	int (*f)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, rx ? "sc_devmem_bind_rx"
							    : "sc_devmem_bind_tx");
	if (!f)
		fail("sc_devmem_bind_* not found (run under shortcut run)");
	return f(fd);
}

/* ---- server ---------------------------------------------------------------- */

static int server(int argc, char **argv)
{
	size_t pages = 16000;
	int use_api = 0, hold = 0;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--pages") && i + 1 < argc)
			pages = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--bind") && i + 1 < argc)
			use_api = !strcmp(argv[++i], "api");
		else if (!strcmp(argv[i], "--hold"))
			hold = 1;
	}
	size_t size = pages * 4096;
	unsigned char *mem;
	int mfd = region(size, &mem);
	int nls = -1;
	int id = use_api ? bind_api(mfd, 1)
			 : nl_bind(&nls, 13, if_nametoindex("lo"), mfd, 1, 0, 0);
	if (id <= 0) {
		errno = -id;
		die("bind-rx");
	}
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 1) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &al) < 0)
		die("listen");
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	int c = accept(ls, NULL, NULL);
	if (c < 0)
		die("accept");
	static char iobuf[819200], ctl[80000];
	uint64_t off = 0, frags = 0, linear = 0, plain = 0;
	struct dm_token *held = calloc(pages + 1, sizeof(*held));
	size_t nheld = 0, held_max = 0;
	size_t fulls = 0;
	for (;;) {
		struct iovec iov = { iobuf, sizeof(iobuf) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				    .msg_controllen = sizeof(ctl) };
		int flags = MSG_SOCK_DEVMEM;
		if (hold && nheld)
			flags |= MSG_DONTWAIT;  /* holding: room only comes back from us */
		ssize_t n = recvmsg(c, &m, flags);
		if (n < 0 && errno == EAGAIN && hold && nheld) {
			if (nheld < pages) {
				/* more to come, or the end */
				struct pollfd p = { .fd = c, .events = POLLIN };
				poll(&p, 1, -1);
				continue;
			}
			/* every chunk of the region is ours: the sender waits
			 * for room; give everything back, 128 tokens a call */
			while (nheld) {
				size_t k = nheld > 128 ? 128 : nheld;
				int r = setsockopt(c, SOL_SOCKET, SO_DEVMEM_DONTNEED, held + nheld - k,
						   (socklen_t)(k * sizeof(*held)));
				if (r != (int)k)
					fail("DONTNEED of %zu held tokens returned %d", k, r);
				nheld -= k;
			}
			fulls++;
			continue;
		}
		if (n < 0)
			die("recvmsg");
		if (n == 0)
			break;
		uint64_t got = 0;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			if (cm->cmsg_level != SOL_SOCKET)
				continue;
			struct dm_cmsg d;
			memcpy(&d, CMSG_DATA(cm), sizeof(d));
			if (cm->cmsg_type == SCM_DEVMEM_LINEAR) {
				for (uint32_t i = 0; i < d.frag_size; i++)
					if ((unsigned char)iobuf[i] != pat(off + i))
						fail("linear byte %llu", (unsigned long long)(off + i));
				off += d.frag_size;
				linear += d.frag_size;
				got += d.frag_size;
				continue;
			}
			if (cm->cmsg_type != SCM_DEVMEM_DMABUF)
				continue;
			if (d.dmabuf_id != (uint32_t)id)
				fail("fragment of dmabuf %u, bound %d", d.dmabuf_id, id);
			if (d.frag_offset + d.frag_size > size)
				fail("fragment outside the region");
			for (uint32_t i = 0; i < d.frag_size; i++)
				if (mem[d.frag_offset + i] != pat(off + i))
					fail("byte %llu (fragment at %llu)", (unsigned long long)(off + i),
					     (unsigned long long)d.frag_offset);
			off += d.frag_size;
			got += d.frag_size;
			frags++;
			struct dm_token t = { d.frag_token, 1 };
			if (hold) {
				held[nheld++] = t;
				if (nheld > held_max)
					held_max = nheld;
			} else if (setsockopt(c, SOL_SOCKET, SO_DEVMEM_DONTNEED, &t, sizeof(t)) != 1) {
				fail("SO_DEVMEM_DONTNEED did not return 1");
			}
		}
		if (!got && !m.msg_controllen) {
			/* no cmsg: plain bytes, as the kernel's loopback gives
			 * them (after a switch back to TCP) */
			for (ssize_t i = 0; i < n; i++)
				if ((unsigned char)iobuf[i] != pat(off + (uint64_t)i))
					fail("plain byte %llu", (unsigned long long)(off + (uint64_t)i));
			off += (uint64_t)n;
			plain += (uint64_t)n;
			got = (uint64_t)n;
		}
		if (got != (uint64_t)n)
			fail("recvmsg returned %zd, cmsgs account for %llu", n, (unsigned long long)got);
	}
	if (nheld && setsockopt(c, SOL_SOCKET, SO_DEVMEM_DONTNEED, held,
				(socklen_t)(nheld > 128 ? 128 : nheld) * sizeof(*held)) < 0)
		die("DONTNEED at the end");
	printf("server ok bytes=%llu frags=%llu linear=%llu plain=%llu held_max=%zu "
	       "region_full=%zu\n", (unsigned long long)off, (unsigned long long)frags,
	       (unsigned long long)linear, (unsigned long long)plain, held_max, fulls);
	close(c);
	if (nls >= 0)
		close(nls);
	return 0;
}

/* ---- client ---------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int wait_completion(int fd, uint32_t want)
{
	char ctl[256];
	for (;;) {
		struct pollfd p = { .fd = fd, .events = 0 };
		if (poll(&p, 1, 10000) <= 0)
			fail("no completion for send %u", want);
		if (!(p.revents & POLLERR))
			continue;
		struct msghdr m = { .msg_control = ctl, .msg_controllen = sizeof(ctl) };
		if (recvmsg(fd, &m, MSG_ERRQUEUE) < 0) {
			if (errno == EAGAIN)
				continue;
			die("MSG_ERRQUEUE");
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			if (!(cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR))
				continue;
			struct sock_extended_err e;
			memcpy(&e, CMSG_DATA(cm), sizeof(e));
			if (e.ee_origin != SO_EE_ORIGIN_ZEROCOPY || e.ee_errno)
				fail("completion origin %u errno %u", e.ee_origin, e.ee_errno);
			if (e.ee_info > want || e.ee_data < want)
				fail("completion [%u, %u] for send %u", e.ee_info, e.ee_data, want);
			return 1;
		}
	}
}

static int client(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int port = atoi(argv[2]);
	uint64_t total = strtoull(argv[3], NULL, 0);
	int tx = 0;
	uint64_t pause_at = UINT64_MAX;
	for (int i = 4; i < argc; i++) {
		if (!strcmp(argv[i], "--tx"))
			tx = 1;
		else if (!strcmp(argv[i], "--pause-at") && i + 1 < argc)
			pause_at = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			rng = strtoull(argv[++i], NULL, 0) | 1;
	}
	size_t cap = 3u << 19;          /* 1.5 MiB */
	unsigned char *mem = NULL;
	int id = 0, nls = -1;
	if (tx) {
		int mfd = region(cap, &mem);
		id = nl_bind(&nls, 15, if_nametoindex("lo"), mfd, 0, 0, 0);
		if (id <= 0) {
			errno = -id;
			die("bind-tx");
		}
	} else {
		mem = malloc(cap);
	}
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (tx && setsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) < 0)
		die("SO_ZEROCOPY");
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	uint64_t off = 0, sends = 0, compl = 0;
	while (off < total) {
		size_t n = next() % 4 ? 1 + next() % 8192 : 1 + next() % cap;
		if (n > total - off)
			n = (size_t)(total - off);
		if (off <= pause_at && off + n >= pause_at) {
			n = (size_t)(pause_at - off);
			if (!n) {
				/* paused: "paused" out, a line in before going on */
				printf("paused %llu\n", (unsigned long long)off);
				char line[16];
				if (!fgets(line, sizeof(line), stdin))
					fail("no go");
				pause_at = UINT64_MAX;
				continue;
			}
		}
		for (size_t i = 0; i < n; i++)
			mem[i] = pat(off + i);
		ssize_t k;
		if (tx) {
			char cb[CMSG_SPACE(sizeof(uint32_t))] = { 0 };
			struct iovec iov = { (void *)0, n };    /* an offset into the region */
			struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb,
					    .msg_controllen = sizeof(cb) };
			struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_DEVMEM_DMABUF;
			cm->cmsg_len = CMSG_LEN(sizeof(uint32_t));
			memcpy(CMSG_DATA(cm), &id, sizeof(uint32_t));
			k = sendmsg(s, &m, MSG_ZEROCOPY);
			if (k < 0)
				die("sendmsg devmem");
			compl += (uint64_t)wait_completion(s, (uint32_t)sends);
		} else {
			k = send(s, mem, n, 0);
			if (k < 0)
				die("send");
		}
		if ((size_t)k != n)
			fail("sent %zd of %zu", k, n);
		off += n;
		sends++;
	}
	shutdown(s, SHUT_WR);
	char b;
	if (recv(s, &b, 1, 0) != 0)
		fail("no EOF from the server");
	printf("client ok bytes=%llu sends=%llu completions=%llu\n", (unsigned long long)off,
	       (unsigned long long)sends, (unsigned long long)compl);
	close(s);
	if (nls >= 0)
		close(nls);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "server"))
		return server(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "client"))
		return client(argc, argv);
	fprintf(stderr, "usage: devmem_nc server [...] | client PORT BYTES [--tx]\n");
	return 2;
}
