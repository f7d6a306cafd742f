/* SPDX-License-Identifier: MIT */
/* An epoll set created and filled before fork is shared by parent and
 * child, as the kernel has it: the child's epoll_wait reports the parent's
 * connections (also a wake-up while it sleeps), a level-triggered event is
 * seen by both, an edge or data taken by one is gone for the other, the
 * child reads a connection through its inherited fd, a connection the
 * parent accepts and adds after the fork is reported to the child (which
 * has no fd for it), DEL and MOD by one apply to the other, and the set
 * works on after the child exits.  The wake-up while the child waits: the
 * child says when it is about to call epoll_wait, and the parent gives the
 * client the word to send once the child's state says it sleeps there (on
 * kernel TCP; the interposer's wait in an inherited set does not sleep, so
 * the parent gives the word anyway after 200 ms: the data is reported
 * whether it comes before or during the wait). */
#include "epoll_common.h"

enum { W_WAIT = 1, W_READ, W_DEL, W_EXIT };

static int ep;
static int conns[8];            /* by tag */
static int to_w[2], from_w[2];
static pid_t w_pid;             /* the child, in the parent */
static bool in_worker;

/* wait_report and ctl (epoll_common.h) on ep, a connection named by its tag,
 * with "child: " first in the child */
static void report(const char *label, int timeout_ms)
{
	struct epoll_event ev[8];
	char line[512];
	int n = epoll_wait(ep, ev, 8, timeout_ms);
	fmt_events(line, sizeof(line), label, n, ev);
	say("%s%s", in_worker ? "child: " : "", line);
}

static void ctl_tag(const char *label, int op, int tag, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u64 = (uint64_t)tag };
	int rc = epoll_ctl(ep, op, conns[tag], &ev);
	if (rc < 0)
		say("%s%s = -1 %s", in_worker ? "child: " : "", label, ename(errno));
	else
		say("%s%s = %d", in_worker ? "child: " : "", label, rc);
}

static void do_read(int tag)
{
	char buf[256];
	ssize_t r = recv(conns[tag], buf, sizeof(buf), MSG_DONTWAIT);
	if (r < 0)
		say("%srecv on connection %d = -1 %s", in_worker ? "child: " : "", tag, ename(errno));
	else
		say("%srecv on connection %d = %zd", in_worker ? "child: " : "", tag, r);
}

/* ---- the child: does what the parent asks, one thing at a time ------------- */

struct wcmd {
	int op, arg, timeout;
	char label[100];
};

static void worker(void)
{
	struct wcmd c;
	in_worker = true;
	t_pid = 0;                      /* fatal() must not kill the client */
	signal(SIGALRM, SIG_DFL);
	alarm(20);
	close(to_w[1]);
	close(from_w[0]);
	for (;;) {
		ssize_t r = read(to_w[0], &c, sizeof(c));
		if (r != sizeof(c))
			_exit(2);
		switch (c.op) {
		case W_WAIT:
			if (c.arg && write(from_w[1], "a", 1) != 1)  /* about to wait */
				_exit(3);
			report(c.label, c.timeout);
			break;
		case W_READ:
			do_read(c.arg);
			break;
		case W_DEL:
			ctl_tag(c.label, EPOLL_CTL_DEL, c.arg, 0);
			break;
		case W_EXIT:
			fflush(stdout);
			_exit(0);
		}
		fflush(stdout);
		if (write(from_w[1], "k", 1) != 1)
			_exit(3);
	}
}

/* have the child do op; with word (W_WAIT only), the client, told to send
 * (C_SEND_LATER) before, gets the word once the child is in its wait */
static void w_(int op, int arg, int timeout, const char *label, bool word)
{
	struct wcmd c = { .op = op, .arg = word ? 1 : arg, .timeout = timeout };
	snprintf(c.label, sizeof(c.label), "%s", label ? label : "");
	char k;
	if (write(to_w[1], &c, sizeof(c)) != sizeof(c))
		fatal("to child");
	if (op == W_EXIT)
		return;
	if (word) {
		if (read(from_w[0], &k, 1) != 1 || k != 'a')
			fatal("the child did not start its wait");
		wait_state_for(w_pid, w_pid, 'S', 200);
		tell();
	}
	if (read(from_w[0], &k, 1) != 1)
		fatal("the child did not answer");
}

static void w(int op, int arg, int timeout, const char *label)
{
	w_(op, arg, timeout, label, false);
}

/* ---- the parent ------------------------------------------------------------- */

static void server(int lfd)
{
	char buf[256];
	cmd_connect(lfd, conns, 3);
	ep = epoll_create1(0);
	if (ep < 0)
		fatal("epoll_create1");
	ctl_tag("ADD connection 1 IN", EPOLL_CTL_ADD, 1, EPOLLIN);
	ctl_tag("ADD connection 2 IN", EPOLL_CTL_ADD, 2, EPOLLIN);
	ctl_tag("ADD connection 3 IN|ET", EPOLL_CTL_ADD, 3, EPOLLIN | EPOLLET);
	report("before fork", 100);
	if (pipe(to_w) < 0 || pipe(from_w) < 0)
		fatal("pipe");
	pid_t pid = t_fork();
	if (pid == 0)
		worker();
	w_pid = pid;
	close(to_w[0]);
	close(from_w[1]);

	w(W_WAIT, 0, 100, "idle");
	cmd(C_SEND_LATER, 1, 5);                /* the client sends at our word */
	w_(W_WAIT, 0, 3000, "sleeping, parent's connection 1 gets 5 bytes", true);
	report("the same, level-triggered", 1000);
	res("parent: recv on connection 1", recv(conns[1], buf, sizeof(buf), 0));
	w(W_WAIT, 0, 100, "after the parent read");

	cmd(C_SEND, 2, 7);
	report("connection 2 gets 7 bytes", 1000);
	w(W_WAIT, 0, 1000, "connection 2 gets 7 bytes");
	w(W_READ, 2, 0, NULL);
	report("after the child read", 100);

	cmd(C_SEND, 3, 4);
	w(W_WAIT, 0, 1000, "connection 3 (EPOLLET) gets 4 bytes");
	report("edge taken by the child", 100);
	res("parent: recv on connection 3", recv(conns[3], buf, sizeof(buf), 0));

	tell_u64(C_CONNECT);
	tell_u64(0);
	tell_u64(0);
	conns[4] = server_conn(lfd);
	await_peer();
	ctl_tag("ADD connection 4 (accepted after the fork) IN", EPOLL_CTL_ADD, 4, EPOLLIN);
	cmd(C_SEND, 4, 3);
	w(W_WAIT, 0, 1000, "connection 4 gets 3 bytes");
	res("parent: recv on connection 4", recv(conns[4], buf, sizeof(buf), 0));
	w(W_WAIT, 0, 100, "after the parent read");

	w(W_DEL, 1, 0, "DEL connection 1");
	cmd(C_SEND, 1, 2);
	report("connection 1 deleted by the child, gets 2 bytes", 100);
	ctl_tag("DEL connection 1 again", EPOLL_CTL_DEL, 1, 0);
	ctl_tag("MOD connection 2 IN|ONESHOT", EPOLL_CTL_MOD, 2, EPOLLIN | EPOLLONESHOT);
	cmd(C_SEND, 2, 6);
	w(W_WAIT, 0, 1000, "connection 2 (ONESHOT) gets 6 bytes");
	report("disabled by the child's report", 100);
	res("parent: recv on connection 2", recv(conns[2], buf, sizeof(buf), 0));

	w(W_EXIT, 0, 0, NULL);
	int st;
	waitpid(pid, &st, 0);
	say("child exited: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
	cmd(C_SEND, 3, 9);
	report("after the child's exit, connection 3 gets 9 bytes", 1000);
	res("parent: recv on connection 3", recv(conns[3], buf, sizeof(buf), 0));
	res("parent: recv on connection 1", recv(conns[1], buf, sizeof(buf), 0));
	tell_u64(C_END);
	tell_u64(0);
	tell_u64(0);
	for (int i = 1; i <= 4; i++)
		close(conns[i]);
	res("close epoll fd", close(ep));
}

static void client(void)
{
	int fds[8], nfd = 1;
	char buf[64];
	memset(buf, 'd', sizeof(buf));
	for (;;) {
		uint64_t c = await_u64(), conn = await_u64(), n = await_u64();
		if (c == C_END)
			break;
		switch (c) {
		case C_CONNECT:
			fds[nfd++] = client_conn();
			break;
		case C_SEND:
			res("send", send(fds[conn], buf, n, 0));
			break;
		case C_SEND_LATER:
			tell();
			await_peer();           /* the server's child sleeps */
			res("send", send(fds[conn], buf, n, 0));
			continue;
		}
		tell();
	}
	for (int i = 1; i < nfd; i++)
		close(fds[i]);
}

int main(void)
{
	return run(server, client);
}
