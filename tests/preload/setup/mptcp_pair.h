/* SPDX-License-Identifier: MIT */
/* The body of the sem_mptcp* programs: a server listening with protocol
 * SERVER_PROTO and a client connecting with CLIENT_PROTO (IPPROTO_MPTCP or
 * IPPROTO_TCP) exchange a greeting and 256 KiB each way, then the client
 * closes.  What each side's socket says it is (SO_PROTOCOL) is part of the
 * transcript: the kernel's answer, under shortcut as without it. */
#include "common.h"

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

#define BULK (256 * 1024)

static const char *proto_name(int fd)
{
	int p = -1;
	socklen_t pl = sizeof(p);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &p, &pl) < 0)
		return ename(errno);
	return p == IPPROTO_MPTCP ? "MPTCP" : p == IPPROTO_TCP ? "TCP" : "other";
}

static int listen_proto(int proto)
{
	int fd = socket(AF_INET, SOCK_STREAM, proto);
	if (fd < 0)
		fatal("socket(protocol %d): %s (is net.mptcp.enabled 1?)", proto, ename(errno));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		fatal("bind/listen");
	tell_u64(ntohs(a.sin_port));
	return fd;
}

static void server(int lfd __attribute__((unused)))
{
	int l = listen_proto(SERVER_PROTO);
	say("listener: %s", proto_name(l));
	int fd = accept(l, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	char buf[8] = { 0 };
	res("recv", recv_all(fd, buf, 5));
	say("got %s", buf);
	res("send", send_all(fd, "world", 5));
	size_t got = 0;
	say("received %s", yesno(recv_count(fd, BULK, &got) == pattern_ck(BULK, 7) && got == BULK));
	say("sent %s", yesno(send_pattern(fd, BULK, 9) == pattern_ck(BULK, 9)));
	res("recv at the client's close", recv(fd, buf, sizeof(buf), 0));
	close(fd);
	close(l);
}

static void client(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)await_u64()) };
	int fd = socket(AF_INET, SOCK_STREAM, CLIENT_PROTO);
	if (fd < 0)
		fatal("socket(protocol %d): %s", CLIENT_PROTO, ename(errno));
	res("connect", connect(fd, (struct sockaddr *)&a, sizeof(a)));
	say("client: %s", proto_name(fd));
	res("send", send_all(fd, "hello", 5));
	char buf[8] = { 0 };
	res("recv", recv_all(fd, buf, 5));
	say("got %s", buf);
	say("sent %s", yesno(send_pattern(fd, BULK, 7) == pattern_ck(BULK, 7)));
	size_t got = 0;
	say("received %s", yesno(recv_count(fd, BULK, &got) == pattern_ck(BULK, 9) && got == BULK));
	close(fd);
}

int main(void)
{
	return run(server, client);
}
