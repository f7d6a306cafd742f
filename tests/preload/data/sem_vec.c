/* SPDX-License-Identifier: MIT */
/* writev/readv, sendmsg/recvmsg (several iovecs, zero-length ones, msg_flags,
 * msg_namelen), recvfrom's address length, sendmmsg/recvmmsg, IOV_MAX. */
#include "common.h"
#include <limits.h>
#include <sys/uio.h>

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char a[100], b[1000], c[7], d[4000];
	struct iovec iov[4] = { { a, sizeof(a) }, { b, sizeof(b) }, { c, sizeof(c) }, { d, sizeof(d) } };

	await_peer();                           /* client: writev of 3000 bytes */
	ssize_t n = readv(fd, iov, 4);
	res("readv into 100+1000+7+4000", n);
	uint64_t h = ck(ck(ck(ck(CK_INIT, a, 100), b, 1000), c, 7), d, n > 1107 ? (size_t)n - 1107 : 0);
	say("checksum ok: %s", yesno(h == pattern_ck(3000, 8)));
	tell();

	await_peer();                           /* client: sendmsg of 5 iovecs, 2 empty */
	struct sockaddr_storage from;
	memset(&from, 0xab, sizeof(from));
	struct msghdr m = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = iov,
			    .msg_iovlen = 4, .msg_flags = 0x7fff0000 };
	n = recvmsg(fd, &m, 0);
	res("recvmsg", n);
	say("msg_namelen %u, msg_flags 0x%x, msg_controllen %zu", (unsigned)m.msg_namelen,
	    (unsigned)m.msg_flags, (size_t)m.msg_controllen);
	h = ck(ck(ck(ck(CK_INIT, a, 100), b, 1000), c, 7), d, n > 1107 ? (size_t)n - 1107 : 0);
	say("checksum ok: %s", yesno(h == pattern_ck(1500, 9)));
	socklen_t fl = sizeof(from);
	n = recvfrom(fd, a, sizeof(a), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
	res("recvfrom(DONTWAIT) on empty", n);
	tell();

	await_peer();                           /* client: 10 bytes */
	fl = sizeof(from);
	n = recvfrom(fd, a, sizeof(a), 0, (struct sockaddr *)&from, &fl);
	res("recvfrom with address", n);
	say("fromlen %u", (unsigned)fl);
	tell();

	await_peer();                           /* client: sendmmsg 3 messages (10, 20, 30) */
	char r1[10], r2[20], r3[30];
	struct iovec v1 = { r1, 10 }, v2 = { r2, 20 }, v3 = { r3, 30 };
	struct mmsghdr mm[3] = { { .msg_hdr = { .msg_iov = &v1, .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &v2, .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &v3, .msg_iovlen = 1 } } };
	int k = recvmmsg(fd, mm, 3, MSG_WAITFORONE, NULL);
	res("recvmmsg(3, WAITFORONE)", k);
	for (int i = 0; i < (k > 0 ? k : 0); i++)
		say("message %d: msg_len %u", i, mm[i].msg_len);
	h = ck(ck(ck(CK_INIT, r1, 10), r2, 20), r3, 30);
	say("checksum ok: %s", yesno(h == pattern_ck(60, 10)));
	tell();

	await_peer();                           /* client: 100 bytes */
	char big[1000];
	struct iovec vb = { big, sizeof(big) };
	struct mmsghdr mb[3] = { { .msg_hdr = { .msg_iov = &vb, .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &vb, .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &vb, .msg_iovlen = 1 } } };
	k = recvmmsg(fd, mb, 3, MSG_WAITFORONE, NULL);
	res("recvmmsg(3, WAITFORONE) of one 100-byte send", k);
	say("message 0: msg_len %u", mb[0].msg_len);
	k = recvmmsg(fd, mb, 3, MSG_DONTWAIT, NULL);
	res("recvmmsg(DONTWAIT) on empty", k);

	res("readv with iovcnt 0", readv(fd, iov, 0));
	struct iovec *many = calloc(IOV_MAX + 1, sizeof(*many));
	res("readv with IOV_MAX+1", readv(fd, many, IOV_MAX + 1));
	volatile int neg = -1;
	res("readv with iovcnt -1", readv(fd, iov, neg));
	free(many);
	tell();
	await_peer();
	res("recv at EOF", recv(fd, a, sizeof(a), 0));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	char buf[3000];

	pattern(buf, 3000, 0, 8);
	struct iovec iov[3] = { { buf, 1 }, { buf + 1, 1999 }, { buf + 2000, 1000 } };
	res("writev 1+1999+1000", writev(fd, iov, 3));
	tell();
	await_peer();

	pattern(buf, 1500, 0, 9);
	struct iovec iov5[5] = { { buf, 0 }, { buf, 700 }, { NULL, 0 }, { buf + 700, 800 },
				 { buf + 1500, 0 } };
	struct msghdr m = { .msg_iov = iov5, .msg_iovlen = 5 };
	res("sendmsg 0+700+0+800+0", sendmsg(fd, &m, 0));
	tell();
	await_peer();
	res("send 10", send(fd, "0123456789", 10, 0));
	tell();
	await_peer();

	pattern(buf, 60, 0, 10);
	struct iovec v1 = { buf, 10 }, v2 = { buf + 10, 20 }, v3 = { buf + 30, 30 };
	struct mmsghdr mm[3] = { { .msg_hdr = { .msg_iov = &v1, .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &v2, .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &v3, .msg_iovlen = 1 } } };
	int k = sendmmsg(fd, mm, 3, 0);
	res("sendmmsg 10+20+30", k);
	for (int i = 0; i < (k > 0 ? k : 0); i++)
		say("message %d: msg_len %u", i, mm[i].msg_len);
	tell();
	await_peer();
	res("send 100", send(fd, buf, 100, 0));
	tell();
	await_peer();

	res("writev with iovcnt 0", writev(fd, iov, 0));
	struct iovec z = { buf, 0 };
	res("writev of 0 bytes", writev(fd, &z, 1));
	struct msghdr mz = { .msg_iov = &z, .msg_iovlen = 1 };
	res("sendmsg of 0 bytes", sendmsg(fd, &mz, 0));
	res("send of 0 bytes", send(fd, buf, 0, 0));
	struct iovec *many = calloc(IOV_MAX + 1, sizeof(*many));
	res("writev with IOV_MAX+1", writev(fd, many, IOV_MAX + 1));
	free(many);
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	tell();
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
