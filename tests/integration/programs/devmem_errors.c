/* SPDX-License-Identifier: MIT */
/*
 * Every error case of devmem binding, receive, release and transmit, one
 * line each: "case: result" (an errno name, or a value).  Run under
 * `shortcut run` (test_devmem.py compares the lines with the table in
 * docs/devmem.md) and on the kernel (its own answers on loopback, for the
 * table's other column).  Builds its netlink messages by hand
 * (devmem_nc.c's nl_bind, included).
 */
#define main devmem_nc_main
#include "devmem_nc.c"
#undef main

static const char *ename(int e)
{
	static char b[16];
	switch (e) {
#define E(x) case x: return #x;
	E(EINVAL) E(ERANGE) E(EBADF) E(EEXIST) E(EBUSY) E(ENODEV) E(EOPNOTSUPP) E(EFAULT)
	E(EAGAIN) E(ENOENT) E(EPERM) E(ENOTCONN) E(EPROTO)
#undef E
	}
	snprintf(b, sizeof(b), "errno%d", e);
	return b;
}

static void bindcase(const char *what, int cmd, unsigned ifindex, int fd, int nq, int qtype,
		     int qid, int keep)
{
	int nls;
	int r = nl_bind(&nls, cmd, ifindex, fd, nq, qtype, qid);
	if (r > 0)
		printf("%s: id\n", what);
	else
		printf("%s: %s\n", what, ename(-r));
	if (!keep)
		close(nls);
}

static void say_rc(const char *what, long r)
{
	if (r < 0)
		printf("%s: %s\n", what, ename(errno));
	else
		printf("%s: %ld\n", what, r);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsigned lo = if_nametoindex("lo");
	unsigned char *mem;
	int mfd = region(1u << 20, &mem);
	int empty = memfd_create("empty", MFD_CLOEXEC);
	int pfd[2];
	if (pipe(pfd) < 0)
		die("pipe");

	/* binding */
	bindcase("bind-rx, no queue", 13, lo, mfd, 0, 0, 0, 0);
	bindcase("bind-rx, a tx queue", 13, lo, mfd, 1, 1, 0, 0);
	bindcase("bind-rx, queue 1 (loopback has one)", 13, lo, mfd, 1, 0, 1, 0);
	bindcase("bind-rx, fd -1", 13, lo, -1, 1, 0, 0, 0);
	bindcase("bind-rx, a pipe", 13, lo, pfd[0], 1, 0, 0, 0);
	bindcase("bind-rx, an empty memfd", 13, lo, empty, 1, 0, 0, 0);
	bindcase("bind-rx, no such device", 13, 999999, mfd, 1, 0, 0, 0);
	int nls_rx;
	int rxid = nl_bind(&nls_rx, 13, lo, mfd, 1, 0, 0);
	printf("bind-rx: %s\n", rxid > 0 ? "id" : ename(-rxid));
	bindcase("bind-rx again (its queue is bound)", 13, lo, mfd, 1, 0, 0, 0);
	close(nls_rx);  /* unbinds */
	bindcase("bind-rx after the first's netlink socket closed", 13, lo, mfd, 1, 0, 0, 0);
	bindcase("bind-tx, fd -1", 15, lo, -1, 0, 0, 0, 0);
	rxid = nl_bind(&nls_rx, 13, lo, mfd, 1, 0, 0);
	int nls_tx, txmfd;
	unsigned char *txmem;
	txmfd = region(1u << 16, &txmem);
	int txid = nl_bind(&nls_tx, 15, lo, txmfd, 0, 0, 0);
	printf("bind-tx: %s\n", txid > 0 ? "id" : ename(-txid));

	/* a connection (accelerated when both ends are) */
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 1) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &al) < 0)
		die("listen");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	int s = accept(ls, NULL, NULL);
	char iob[8192], ctl[4096];
	struct iovec iov = { iob, sizeof(iob) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };
	/* the first devmem receive asks for devmem: then fragments */
	if (send(c, "x", 1, 0) != 1)
		die("send");
	say_rc("recvmsg devmem, bytes sent before it asked", recvmsg(s, &m, MSG_SOCK_DEVMEM));
	int one = 1;
	setsockopt(c, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one));
	/* keep sending until a fragment shows (the sender frames its ring
	 * once it has the region mapped) */
	int frag_seen = 0;
	for (int i = 0; i < 2000 && !frag_seen; i++) {
		if (send(c, "abcdefgh", 8, 0) != 8)
			die("send");
		struct pollfd p = { .fd = s, .events = POLLIN };
		poll(&p, 1, 1000);
		m.msg_controllen = sizeof(ctl);
		ssize_t n = recvmsg(s, &m, MSG_SOCK_DEVMEM);
		for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; cm;
		     cm = CMSG_NXTHDR(&m, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_DEVMEM_DMABUF) {
				frag_seen = 1;
				struct dm_cmsg d;
				memcpy(&d, CMSG_DATA(cm), sizeof(d));
				struct dm_token t = { d.frag_token, 1 };
				say_rc("DONTNEED, a fragment's token",
				       setsockopt(s, SOL_SOCKET, SO_DEVMEM_DONTNEED, &t, sizeof(t)));
				say_rc("DONTNEED, the same token again",
				       setsockopt(s, SOL_SOCKET, SO_DEVMEM_DONTNEED, &t, sizeof(t)));
			}
	}
	printf("fragments: %s\n", frag_seen ? "yes" : "no");
	/* receive */
	if (send(c, "abcdefgh", 8, 0) != 8)
		die("send");
	struct pollfd p = { .fd = s, .events = POLLIN };
	poll(&p, 1, 5000);
	char b[8];
	say_rc("plain recv of fragments", recv(s, b, sizeof(b), 0));
	m.msg_controllen = 16;
	say_rc("recvmsg devmem, control buffer too small", recvmsg(s, &m, MSG_SOCK_DEVMEM));
	m.msg_controllen = sizeof(ctl);
	say_rc("recvmsg devmem | MSG_PEEK", recvmsg(s, &m, MSG_SOCK_DEVMEM | MSG_PEEK));
	m.msg_controllen = sizeof(ctl);
	ssize_t n = recvmsg(s, &m, MSG_SOCK_DEVMEM);
	say_rc("recvmsg devmem", n);
	/* release */
	struct dm_token toks[129] = { { 0, 0 } };
	toks[0] = (struct dm_token){ 123456, 1 };
	say_rc("DONTNEED, length not a multiple of 8", setsockopt(s, SOL_SOCKET,
								     SO_DEVMEM_DONTNEED, toks, 5));
	say_rc("DONTNEED, 129 tokens", setsockopt(s, SOL_SOCKET, SO_DEVMEM_DONTNEED, toks,
						     sizeof(toks)));
	say_rc("DONTNEED, an unknown token", setsockopt(s, SOL_SOCKET, SO_DEVMEM_DONTNEED, toks,
							   sizeof(toks[0])));
	/* transmit */
	char cb[CMSG_SPACE(sizeof(uint32_t))];
	struct iovec tv = { (void *)0, 100 };
	struct msghdr tm = { .msg_iov = &tv, .msg_iovlen = 1, .msg_control = cb,
			     .msg_controllen = sizeof(cb) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&tm);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_DEVMEM_DMABUF;
	cm->cmsg_len = CMSG_LEN(sizeof(uint32_t));
	uint32_t bad = 4242;
	memcpy(CMSG_DATA(cm), &bad, 4);
	say_rc("sendmsg devmem, unknown binding", sendmsg(c, &tm, MSG_ZEROCOPY));
	memcpy(CMSG_DATA(cm), &txid, 4);
	tv.iov_base = (void *)(uintptr_t)((1u << 16) - 10);
	say_rc("sendmsg devmem, range outside the region", sendmsg(c, &tm, MSG_ZEROCOPY));
	tv.iov_base = 0;
	say_rc("sendmsg devmem, without MSG_ZEROCOPY", sendmsg(c, &tm, 0));
	say_rc("sendmsg devmem", sendmsg(c, &tm, MSG_ZEROCOPY));
	say_rc("send MSG_ZEROCOPY, an ordinary buffer", send(c, "0123456789", 10, MSG_ZEROCOPY));
	char ectl[256];
	for (int k = 0; k < 2; k++) {
		struct pollfd ep = { .fd = c };
		poll(&ep, 1, 5000);
		struct msghdr em = { .msg_control = ectl, .msg_controllen = sizeof(ectl) };
		ssize_t r = recvmsg(c, &em, MSG_ERRQUEUE);
		struct cmsghdr *x = r == 0 ? CMSG_FIRSTHDR(&em) : NULL;
		if (x) {
			struct sock_extended_err e;
			memcpy(&e, CMSG_DATA(x), sizeof(e));
			printf("completion: origin %u code %u [%u, %u]\n", e.ee_origin, e.ee_code,
			       e.ee_info, e.ee_data);
		} else {
			say_rc("completion", r < 0 ? -1 : 0);
		}
	}
	struct msghdr em = { .msg_control = ectl, .msg_controllen = sizeof(ectl) };
	say_rc("MSG_ERRQUEUE, nothing queued", recvmsg(c, &em, MSG_ERRQUEUE | MSG_DONTWAIT));
	close(nls_tx);
	close(nls_rx);
	return 0;
}
