/* SPDX-License-Identifier: MIT */
/* An epoll set inside another: the inner set holds accelerated connections
 * (and a pipe), the outer set holds the inner set's fd (and one connection
 * directly).  The outer reports the inner as readable exactly while the
 * inner has something to report (level-triggered), once per new event
 * (EPOLLET), also to a sleeping epoll_wait and three levels deep; poll()
 * on the inner set's fd says the same; an inner EPOLLET event consumed
 * leaves the outer idle; the inner set filled before or after it joined
 * the outer; loops refused (ELOOP, EINVAL). */
#include "common.h"
#include "epoll_common.h"
#include <sys/epoll.h>

static int conns[8];

static void server(int lfd)
{
	cmd_connect(lfd, conns, 3);
	int pp[2];
	if (pipe(pp) < 0)
		fatal("pipe");
	char c;

	say("--- inner set filled first, then added to the outer");
	int in = epoll_create1(0), out = epoll_create1(0);
	if (in < 0 || out < 0)
		fatal("epoll_create1");
	ctl("inner: ADD connection 1 IN", in, EPOLL_CTL_ADD, conns[1], EPOLLIN, 1);
	ctl("inner: ADD pipe IN", in, EPOLL_CTL_ADD, pp[0], EPOLLIN, 2);
	ctl("outer: ADD inner IN", out, EPOLL_CTL_ADD, in, EPOLLIN, 100);
	ctl("outer: ADD connection 2 IN", out, EPOLL_CTL_ADD, conns[2], EPOLLIN, 3);
	wait_report(out, "outer, idle", 100);
	wait_report(in, "inner, idle", 0);
	poll1("poll(inner), idle", in, POLLIN, 0);

	cmd(C_SEND, 1, 5);
	wait_report(out, "outer, connection 1 got 5", 1000);
	poll1("poll(inner)", in, POLLIN, 1000);
	wait_report(out, "outer again (level)", 1000);
	wait_report(in, "inner", 0);
	drain("connection 1", conns[1]);
	wait_report(out, "outer, drained", 100);
	wait_report(in, "inner, drained", 0);
	poll1("poll(inner), drained", in, POLLIN, 0);

	cmd(C_SEND, 2, 6);
	wait_report(out, "outer, connection 2 (direct) got 6", 1000);
	drain("connection 2", conns[2]);

	if (write(pp[1], "p", 1) != 1)
		fatal("write");
	wait_report(out, "outer, pipe written", 1000);
	wait_report(in, "inner", 0);
	if (read(pp[0], &c, 1) != 1)
		fatal("read");
	wait_report(out, "outer, pipe read", 100);

	cmd(C_SEND_LATER, 1, 4);
	wait_report(out, "outer sleeping, connection 1 gets 4", 3000);
	wait_report(in, "inner", 0);
	drain("connection 1", conns[1]);

	cmd(C_SEND, 1, 3);
	cmd(C_SEND, 2, 3);
	wait_report(out, "outer, both connections got 3", 1000);
	wait_report(in, "inner", 0);
	drain("connection 1", conns[1]);
	drain("connection 2", conns[2]);
	wait_report(out, "outer, drained", 100);

	say("--- the inner set in the outer with EPOLLET");
	ctl("outer: MOD inner IN|ET", out, EPOLL_CTL_MOD, in, EPOLLIN | EPOLLET, 101);
	wait_report(out, "outer, idle", 100);
	cmd(C_SEND, 1, 5);
	wait_report(out, "outer, connection 1 got 5", 1000);
	wait_report(out, "outer, no new edge", 100);
	cmd(C_SEND, 1, 5);
	wait_report(out, "outer, 5 more", 1000);
	wait_report(in, "inner", 0);
	drain("connection 1", conns[1]);
	wait_report(out, "outer, drained", 100);
	ctl("outer: MOD inner IN", out, EPOLL_CTL_MOD, in, EPOLLIN, 100);

	say("--- EPOLLET inside the inner set");
	ctl("inner: MOD connection 1 IN|ET", in, EPOLL_CTL_MOD, conns[1], EPOLLIN | EPOLLET, 1);
	cmd(C_SEND, 1, 2);
	wait_report(out, "outer, connection 1 got 2", 1000);
	wait_report(out, "outer again, the inner has not reported yet", 1000);
	wait_report(in, "inner", 0);
	wait_report(out, "outer, the inner's edge taken (data unread)", 100);
	poll1("poll(inner)", in, POLLIN, 0);
	cmd(C_SEND, 1, 2);
	wait_report(out, "outer, 2 more", 1000);
	wait_report(in, "inner", 0);
	drain("connection 1", conns[1]);
	ctl("inner: MOD connection 1 IN", in, EPOLL_CTL_MOD, conns[1], EPOLLIN, 1);

	say("--- three levels");
	int top = epoll_create1(0);
	ctl("top: ADD outer IN", top, EPOLL_CTL_ADD, out, EPOLLIN, 200);
	wait_report(top, "top, idle", 100);
	cmd(C_SEND, 1, 8);
	wait_report(top, "top, connection 1 got 8", 1000);
	wait_report(out, "outer", 0);
	wait_report(in, "inner", 0);
	drain("connection 1", conns[1]);
	wait_report(top, "top, drained", 100);
	cmd(C_SEND_LATER, 1, 1);
	wait_report(top, "top sleeping, connection 1 gets 1", 3000);
	drain("connection 1", conns[1]);
	wait_report(top, "top, drained", 100);

	say("--- loops");
	ctl("inner: ADD outer", in, EPOLL_CTL_ADD, out, EPOLLIN, 9);
	ctl("inner: ADD inner", in, EPOLL_CTL_ADD, in, EPOLLIN, 9);
	ctl("outer: ADD top", out, EPOLL_CTL_ADD, top, EPOLLIN, 9);

	say("--- closing the inner's connection");
	cmd(C_SEND, 1, 3);
	wait_report(out, "outer, connection 1 got 3", 1000);
	res("close connection 1 (unread data)", close(conns[1]));
	wait_report(out, "outer, connection 1 closed", 100);
	wait_report(in, "inner", 0);
	close(top);
	close(out);
	close(in);

	say("--- a second inner set, added to the outer while empty");
	in = epoll_create1(0);
	out = epoll_create1(0);
	ctl("outer: ADD inner IN", out, EPOLL_CTL_ADD, in, EPOLLIN, 100);
	wait_report(out, "outer, empty inner", 100);
	cmd(C_SEND, 3, 4);
	ctl("inner: ADD connection 3 IN (data pending)", in, EPOLL_CTL_ADD, conns[3], EPOLLIN, 4);
	wait_report(out, "outer", 1000);
	wait_report(in, "inner", 0);
	drain("connection 3", conns[3]);
	wait_report(out, "outer, drained", 100);
	ctl("inner: ADD connection 2 IN", in, EPOLL_CTL_ADD, conns[2], EPOLLIN, 3);
	wait_report(out, "outer, idle", 100);
	cmd(C_SEND_LATER, 2, 2);
	wait_report(out, "outer sleeping, connection 2 gets 2", 3000);
	wait_report(in, "inner", 0);
	drain("connection 2", conns[2]);
	wait_report(out, "outer, drained", 100);
	ctl("inner: DEL connection 2", in, EPOLL_CTL_DEL, conns[2], 0, 0);
	cmd(C_SEND, 2, 1);
	wait_report(out, "outer, deleted connection got 1", 100);
	close(out);
	close(in);

	tell_u64(C_END);
	tell_u64(0);
	tell_u64(0);
	close(conns[2]);
	close(conns[3]);
	close(pp[0]);
	close(pp[1]);
}

static void client(void)
{
	cmd_client('n');
}

int main(void)
{
	return run(server, client);
}
