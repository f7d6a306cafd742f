/* SPDX-License-Identifier: MIT */
/* Nonblocking sockets three ways: accept4(SOCK_NONBLOCK), fcntl O_NONBLOCK,
 * ioctl FIONBIO.  recv gives EAGAIN; filling the send side ends in EAGAIN;
 * once the peer drains, POLLOUT comes back; MSG_DONTWAIT on a blocking
 * socket.  The filled connection has fixed buffers (SO_SNDBUF on the
 * client's socket, SO_RCVBUF on the listener before the client connects):
 * the kernel's autotuning cannot open room after the client saw EAGAIN.
 * The server sends to the client's blocking recv once the client's state
 * says it sleeps there, not after a fixed time. */
#include "common.h"

#define BUFSZ 65536

static void server(int lfd)
{
	set_rcvbuf(lfd, BUFSZ);
	tell();                                 /* client: connect now */
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	if (fd < 0)
		fatal("accept4");
	hs_server(fd);
	char buf[65536];

	say("accept4(SOCK_NONBLOCK) gives O_NONBLOCK: %s", yesno(fcntl(fd, F_GETFL) & O_NONBLOCK));
	res("recv on empty", recv(fd, buf, sizeof(buf), 0));
	res("read on empty", read(fd, buf, sizeof(buf)));
	tell();
	uint64_t total = await_u64(), want = await_u64();   /* client filled its side */
	poll1("with the client's data queued", fd, POLLIN, 1000);
	size_t got;
	uint64_t h = recv_count(fd, total, &got);
	say("drained all, checksum ok: %s", yesno(got == total && h == want));
	res("recv drained", recv(fd, buf, sizeof(buf), 0));
	tell();
	await_peer();                           /* client: back to blocking */

	int zero = 0, one = 1;
	res("ioctl(FIONBIO, 0)", ioctl(fd, FIONBIO, &zero));
	say("O_NONBLOCK after FIONBIO 0: %s", yesno(fcntl(fd, F_GETFL) & O_NONBLOCK));
	res("ioctl(FIONBIO, 1)", ioctl(fd, FIONBIO, &one));
	say("O_NONBLOCK after FIONBIO 1: %s", yesno(fcntl(fd, F_GETFL) & O_NONBLOCK));
	res("recv", recv(fd, buf, sizeof(buf), 0));
	await_peer_asleep();                    /* the client blocks in recv meanwhile */
	res("send 5", send(fd, "later", 5, 0));
	await_peer();
	res("ioctl(FIONBIO, 0)", ioctl(fd, FIONBIO, &zero));
	tell();
	res("recv (blocking) of client's 3 bytes", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
	tell();
}

static void client(void)
{
	int fd = sndbuf_socket(BUFSZ);
	await_peer();                           /* the listener's SO_RCVBUF is set */
	connect_hs(fd);
	char buf[65536];

	await_peer();
	int fl = fcntl(fd, F_GETFL);
	res("fcntl(F_SETFL, O_NONBLOCK)", fcntl(fd, F_SETFL, fl | O_NONBLOCK));
	say("O_NONBLOCK: %s", yesno(fcntl(fd, F_GETFL) & O_NONBLOCK));
	res("recv on empty", recv(fd, buf, sizeof(buf), 0));
	res("recvfrom on empty", recvfrom(fd, buf, sizeof(buf), 0, NULL, NULL));

	uint64_t total = 0, h = CK_INIT;
	ssize_t n;
	for (;;) {
		pattern(buf, sizeof(buf), total, 6);
		n = send(fd, buf, sizeof(buf), 0);
		if (n < 0)
			break;
		h = ck(h, buf, (size_t)n);
		total += (uint64_t)n;
		if (total > (1u << 30))
			break;
	}
	say("got EAGAIN after sending >= 1 byte: %s", yesno(n < 0 && errno == EAGAIN && total > 0));
	res("send again when full", send(fd, buf, 1, 0));
	poll1("when full", fd, POLLOUT, 0);
	tell_u64(total);
	tell_u64(h);
	await_peer();                           /* server drained */
	poll1("after the peer drained", fd, POLLOUT, 2000);
	res("fcntl(F_SETFL, blocking)", fcntl(fd, F_SETFL, fl & ~O_NONBLOCK));
	say("O_NONBLOCK: %s", yesno(fcntl(fd, F_GETFL) & O_NONBLOCK));
	res("recv(DONTWAIT) on blocking socket", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	tell();
	n = recv(fd, buf, sizeof(buf), 0);      /* blocks until the server sends */
	res("blocking recv", n);
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	tell();
	await_peer();
	res("send 3", send(fd, "abc", 3, 0));
	await_peer();
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
