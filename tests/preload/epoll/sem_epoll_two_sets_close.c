/* SPDX-License-Identifier: MIT */
/* A connection in several epoll sets, and the set it joined first goes
 * away (closed, or the connection DEL'd from it): the other sets go on
 * reporting it, to a sleeping epoll_wait too, level-triggered and EPOLLET;
 * a set it joins afterwards works as well. */
#include "common.h"
#include "epoll_common.h"
#include <sys/epoll.h>

static int conns[8];

static void server(int lfd)
{
	cmd_connect(lfd, conns, 2);
	int a = conns[1], b = conns[2];

	say("--- the first set closed");
	int e1 = epoll_create1(0), e2 = epoll_create1(0);
	ctl("set 1: ADD A IN", e1, EPOLL_CTL_ADD, a, EPOLLIN, 11);
	ctl("set 2: ADD A IN", e2, EPOLL_CTL_ADD, a, EPOLLIN, 21);
	cmd(C_SEND, 1, 1);
	wait_report(e1, "set 1, A got 1", 1000);
	wait_report(e2, "set 2, A got 1", 1000);
	drain("A", a);
	res("close set 1", close(e1));
	cmd(C_SEND, 1, 2);
	wait_report(e2, "set 2, A got 2", 1000);
	wait_report(e2, "set 2 again", 1000);
	drain("A", a);
	wait_report(e2, "set 2, drained", 100);
	cmd(C_SEND_LATER, 1, 3);
	wait_report(e2, "set 2 sleeping, A gets 3", 3000);
	drain("A", a);
	ctl("set 2: MOD A IN|ET", e2, EPOLL_CTL_MOD, a, EPOLLIN | EPOLLET, 22);
	cmd(C_SEND_LATER, 1, 4);
	wait_report(e2, "set 2 (ET) sleeping, A gets 4", 3000);
	wait_report(e2, "set 2, no new edge", 100);
	drain("A", a);

	say("--- a third set joined afterwards");
	int e3 = epoll_create1(0);
	ctl("set 3: ADD A IN", e3, EPOLL_CTL_ADD, a, EPOLLIN, 31);
	cmd(C_SEND_LATER, 1, 5);
	wait_report(e3, "set 3 sleeping, A gets 5", 3000);
	wait_report(e2, "set 2", 1000);
	drain("A", a);
	res("close set 2", close(e2));
	cmd(C_SEND_LATER, 1, 6);
	wait_report(e3, "set 3 sleeping, A gets 6", 3000);
	drain("A", a);
	close(e3);

	say("--- DEL from the first set");
	e1 = epoll_create1(0);
	e2 = epoll_create1(0);
	ctl("set 1: ADD B IN", e1, EPOLL_CTL_ADD, b, EPOLLIN, 41);
	ctl("set 2: ADD B IN", e2, EPOLL_CTL_ADD, b, EPOLLIN, 51);
	ctl("set 1: DEL B", e1, EPOLL_CTL_DEL, b, 0, 0);
	cmd(C_SEND_LATER, 2, 7);
	wait_report(e2, "set 2 sleeping, B gets 7", 3000);
	wait_report(e1, "set 1 (deleted)", 100);
	drain("B", b);
	cmd(C_SEND, 2, 8);
	wait_report(e2, "set 2, B got 8", 1000);
	drain("B", b);
	close(e1);
	close(e2);

	tell_u64(C_END);
	tell_u64(0);
	tell_u64(0);
	close(a);
	close(b);
}

static void client(void)
{
	cmd_client('c');
}

int main(void)
{
	return run(server, client);
}
