/* SPDX-License-Identifier: MIT */
/* The helpers of the epoll oracle programs (epoll_common.h). */
#include "epoll_common.h"

/* "label: epoll_wait = n [tag T MASK]..." with the events sorted by tag */
int fmt_events(char *line, size_t cap, const char *label, int n,
		struct epoll_event *ev)
{
	if (n < 0)
		return snprintf(line, cap, "%s: epoll_wait = -1 %s", label, ename(errno));
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (ev[j].data.u64 < ev[i].data.u64) {
				struct epoll_event t = ev[i];
				ev[i] = ev[j];
				ev[j] = t;
			}
	int len = snprintf(line, cap, "%s: epoll_wait = %d", label, n);
	for (int i = 0; i < n; i++)
		len += snprintf(line + len, cap - (size_t)len, " [tag %llu %s]",
				(unsigned long long)ev[i].data.u64, pmask((int)ev[i].events));
	return len;
}

void wait_report(int ep, const char *label, int timeout_ms)
{
	struct epoll_event ev[8];
	char line[512];
	int n = epoll_wait(ep, ev, 8, timeout_ms);
	fmt_events(line, sizeof(line), label, n, ev);
	say("%s", line);
}

int ctl(const char *label, int ep, int op, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };
	int rc = epoll_ctl(ep, op, fd, &ev);
	res(label, rc);
	return rc;
}

/* server: have the client do c on its connection conn (n bytes) */
void cmd(uint64_t c, uint64_t conn, uint64_t n)
{
	tell_u64(c);
	tell_u64(conn);
	tell_u64(n);
	await_peer();
}

/* server: the client makes n connections, one at a time; conns[1..n] */
void cmd_connect(int lfd, int *conns, int n)
{
	for (int i = 1; i <= n; i++) {
		tell_u64(C_CONNECT);
		tell_u64(0);
		tell_u64(0);
		conns[i] = server_conn(lfd);
		await_peer();
	}
}

/* a thread of ours is asleep: its tid (set by the thread itself, 0 until
 * then) once it is, a hang guard failing loudly */
void wait_tid_asleep(_Atomic pid_t *tid)
{
	long t0 = t_now_ms();
	while (!atomic_load(tid)) {
		if (t_now_ms() - t0 > T_GUARD_MS)
			fatal("a thread did not start");
		msleep(1);
	}
	wait_thread_asleep(atomic_load(tid));
}

void drain(const char *label, int fd)
{
	char buf[4096];
	long total = 0;
	ssize_t r;
	while ((r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		total += r;
	say("%s: read %ld", label, total);
}

/* client: connections numbered from 1; C_SEND_LATER answers first and
 * sends once the server's main thread sleeps (in the wait that follows the
 * command: the state of its thread, not a time) */
void cmd_client(char fill)
{
	int fds[8], nfd = 1;
	char buf[64];
	memset(buf, fill, sizeof(buf));
	for (;;) {
		uint64_t c = await_u64(), conn = await_u64(), n = await_u64();
		if (c == C_END)
			break;
		switch (c) {
		case C_CONNECT:
			fds[nfd++] = client_conn();
			break;
		case C_SEND:
			if (send(fds[conn], buf, n, MSG_NOSIGNAL) != (ssize_t)n)
				fatal("send");
			break;
		case C_SEND_LATER:
			tell();
			await_peer_asleep();
			if (send(fds[conn], buf, n, MSG_NOSIGNAL) != (ssize_t)n)
				fatal("send");
			continue;
		}
		tell();
	}
	for (int i = 1; i < nfd; i++)
		close(fds[i]);
}

/* server: connection i's request, the reply, EOF; closes fd */
void serve_request(int fd, int i)
{
	char buf[16];
	ssize_t n = recv_all(fd, buf, 5);
	say("connection %d: got \"%.*s\"", i, (int)(n > 0 ? n : 0), buf);
	res("send reply", send(fd, "world", 5, 0));
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	close(fd);
}

void serve_requests(int lfd, int n)
{
	for (int i = 1; i <= n; i++) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			fatal("accept");
		serve_request(fd, i);
	}
}

int connect_said(int fd)
{
	struct sockaddr_in a = t_addr();
	int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	say("connect: %s", rc == 0 ? "0" : errno == EINPROGRESS ? "EINPROGRESS" : ename(errno));
	return rc;
}

void get_reply(int fd)
{
	char buf[16];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0)
		say("recv = -1 %s", ename(errno));
	else
		say("recv = %zd \"%.*s\"", n, (int)n, buf);
}
