/* SPDX-License-Identifier: MIT */
/* A program that sets its own IP_TOS (ssh's IPQoS, many RPC stacks) before
 * connect() is accelerated all the same, and getsockopt returns what it set,
 * before and after connect (issue 11, item 5: the connection stayed on TCP,
 * unsupported_option).  The server sets one on its accepted socket too. */
#include "common.h"
#include <netinet/ip.h>

static void show(const char *label, int fd)
{
	int v = -1;
	socklen_t l = sizeof(v);
	int rc = getsockopt(fd, IPPROTO_IP, IP_TOS, &v, &l);
	say("%s: getsockopt(IP_TOS) = %d, value 0x%x", label, rc, (unsigned)v);
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	int tos = IPTOS_LOWDELAY;
	res("setsockopt(IP_TOS) on the accepted socket", setsockopt(fd, IPPROTO_IP, IP_TOS, &tos,
								     sizeof(tos)));
	show("accepted", fd);
	char buf[16];
	res("recv", recv_all(fd, buf, 5));
	res("send", send_all(fd, "world", 5));
	show("accepted, after the exchange", fd);
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	close(fd);
}

static void client(void)
{
	struct sockaddr_in a = t_addr();
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int tos = IPTOS_THROUGHPUT;     /* ssh's bulk class */
	res("setsockopt(IP_TOS) before connect", setsockopt(fd, IPPROTO_IP, IP_TOS, &tos,
							     sizeof(tos)));
	show("before connect", fd);
	res("connect", connect(fd, (struct sockaddr *)&a, sizeof(a)));
	show("after connect", fd);
	hs_client(fd);
	res("send", send_all(fd, "hello", 5));
	char buf[8] = { 0 };
	res("recv", recv_all(fd, buf, 5));
	say("got %s", buf);
	tos = IPTOS_LOWDELAY;
	res("setsockopt(IP_TOS) again", setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)));
	show("after setting it again", fd);
	close(fd);
}

int main(void)
{
	return run(server, client);
}
