/* SPDX-License-Identifier: MIT */
/* getsockname/getpeername consistent on both sides, socket options
 * (SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN, SO_ERROR, TCP_NODELAY
 * round trip, TCP_INFO state), ENOTCONN on the listener. */
#include "common.h"

static bool same(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_family == b->sin_family && a->sin_port == b->sin_port &&
	       a->sin_addr.s_addr == b->sin_addr.s_addr;
}

static int opt(int fd, int level, int name)
{
	int v = -12345;
	socklen_t l = sizeof(v);
	if (getsockopt(fd, level, name, &v, &l) < 0)
		return -errno - 1000;
	return v;
}

static void options(int fd)
{
	say("SO_TYPE is SOCK_STREAM: %s", yesno(opt(fd, SOL_SOCKET, SO_TYPE) == SOCK_STREAM));
	say("SO_DOMAIN is AF_INET: %s", yesno(opt(fd, SOL_SOCKET, SO_DOMAIN) == AF_INET));
	say("SO_PROTOCOL is IPPROTO_TCP: %s", yesno(opt(fd, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_TCP));
	say("SO_ACCEPTCONN %d", opt(fd, SOL_SOCKET, SO_ACCEPTCONN));
	say("SO_ERROR %d", opt(fd, SOL_SOCKET, SO_ERROR));
	say("TCP_NODELAY %d", opt(fd, IPPROTO_TCP, TCP_NODELAY));
	int one = 1, zero = 0;
	res("set TCP_NODELAY 1", setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
	say("TCP_NODELAY %d", opt(fd, IPPROTO_TCP, TCP_NODELAY));
	res("set TCP_NODELAY 0", setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &zero, sizeof(zero)));
	say("TCP_NODELAY %d", opt(fd, IPPROTO_TCP, TCP_NODELAY));
	say("SO_KEEPALIVE %d", opt(fd, SOL_SOCKET, SO_KEEPALIVE));
	say("SO_SNDBUF > 0: %s, SO_RCVBUF > 0: %s", yesno(opt(fd, SOL_SOCKET, SO_SNDBUF) > 0),
	    yesno(opt(fd, SOL_SOCKET, SO_RCVBUF) > 0));
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	memset(&ti, 0, sizeof(ti));
	res("getsockopt(TCP_INFO)", getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l));
	say("tcpi_state ESTABLISHED: %s", yesno(ti.tcpi_state == 1));
	char small[2];
	l = sizeof(small);
	res("getsockopt(SO_TYPE) into 2 bytes", getsockopt(fd, SOL_SOCKET, SO_TYPE, small, &l));
	say("optlen %u", (unsigned)l);
	res("getsockopt(bad level)", getsockopt(fd, 12345, 1, small, &l));
}

static void server(int lfd)
{
	struct sockaddr_in lname, me, peer, acc, cme, cpeer;
	socklen_t l;
	char buf[16];

	l = sizeof(lname);
	getsockname(lfd, (struct sockaddr *)&lname, &l);
	l = sizeof(peer);
	res("getpeername(listener)", getpeername(lfd, (struct sockaddr *)&peer, &l));
	say("listener SO_ACCEPTCONN %d", opt(lfd, SOL_SOCKET, SO_ACCEPTCONN));

	l = sizeof(acc);
	int fd = accept(lfd, (struct sockaddr *)&acc, &l);
	if (fd < 0)
		fatal("accept");
	say("accept addrlen %u", (unsigned)l);
	hs_server(fd);
	l = sizeof(me);
	res("getsockname", getsockname(fd, (struct sockaddr *)&me, &l));
	say("addrlen %u", (unsigned)l);
	l = sizeof(peer);
	res("getpeername", getpeername(fd, (struct sockaddr *)&peer, &l));
	say("addrlen %u", (unsigned)l);
	get_bytes(&cme, sizeof(cme));
	get_bytes(&cpeer, sizeof(cpeer));
	say("sockname == listener's name: %s", yesno(same(&me, &lname)));
	say("peername == accept's address: %s", yesno(same(&peer, &acc)));
	say("peername == client's sockname: %s", yesno(same(&peer, &cme)));
	say("sockname == client's peername: %s", yesno(same(&me, &cpeer)));
	say("addresses 127.0.0.1: %s", yesno(me.sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
					      peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK)));
	options(fd);
	l = 4;
	res("getsockname into 4 bytes", getsockname(fd, (struct sockaddr *)&me, &l));
	say("addrlen %u", (unsigned)l);
	tell();
	await_peer();                           /* client closed */
	res("recv", recv(fd, buf, sizeof(buf), 0));
	struct sockaddr_in p2;
	l = sizeof(p2);
	res("getpeername after peer close", getpeername(fd, (struct sockaddr *)&p2, &l));
	say("unchanged: %s", yesno(same(&p2, &peer)));
	res("close", close(fd));
	l = sizeof(p2);
	res("getpeername on closed fd", getpeername(fd, (struct sockaddr *)&p2, &l));
}

static void client(void)
{
	struct sockaddr_in me, peer;
	socklen_t l;
	int fd = client_conn();
	l = sizeof(me);
	res("getsockname", getsockname(fd, (struct sockaddr *)&me, &l));
	l = sizeof(peer);
	res("getpeername", getpeername(fd, (struct sockaddr *)&peer, &l));
	put_bytes(&me, sizeof(me));
	put_bytes(&peer, sizeof(peer));
	options(fd);
	await_peer();
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	struct sockaddr_in p2;
	l = sizeof(p2);
	res("getpeername after own SHUT_WR", getpeername(fd, (struct sockaddr *)&p2, &l));
	res("close", close(fd));
	tell();
}

int main(void)
{
	return run(server, client);
}
