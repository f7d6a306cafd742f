/* SPDX-License-Identifier: MIT */
/* One connection in two epoll sets: the first set's epoll_wait returned
 * (its program is busy elsewhere), a wait in the second sleeps: data must
 * wake the second set, and the wait must not busy-loop meanwhile (the
 * process's CPU time while it waits, not its wall time, is checked; from
 * the review's t_two_sets_spin: the second set once watched the first
 * set's channel fd and spun while the first was awake).  The client sends
 * once the server sleeps in the second wait (its state; a spinning wait
 * never sleeps, so the client sends after 1 s anyway, and then the CPU
 * time tells) and 300 ms later, for a spinner to show. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/resource.h>

static long cpu_ms(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000L +
	       (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000;
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];
	int e1 = epoll_create1(0), e2 = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 }, out[2];
	res("ctl e1", epoll_ctl(e1, EPOLL_CTL_ADD, fd, &ev));
	ev.data.u32 = 2;
	res("ctl e2", epoll_ctl(e2, EPOLL_CTL_ADD, fd, &ev));
	tell();                                 /* client: sends 1 byte while e1 waits */
	res("epoll_wait(e1, 3000)", epoll_wait(e1, out, 2, 3000));
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("epoll_wait(e2, 0)", epoll_wait(e2, out, 2, 0));
	tell();                                 /* client: sends 1 byte while e2 waits */
	long c0 = cpu_ms();
	int n = epoll_wait(e2, out, 2, 5000);
	long used = cpu_ms() - c0;
	res("epoll_wait(e2, 5000), e1 not waiting", n);
	say("event for e2's registration: %s", yesno(n == 1 && out[0].data.u32 == 2));
	say("CPU time while waiting under 100 ms: %s", yesno(used < 100));
	if (used >= 100)
		fprintf(stderr, "server: %ld ms of CPU time in epoll_wait(e2)\n", used);
	res("recv", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	tell();
	await_peer();
	close(e1);
	close(e2);
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	await_peer_asleep();                    /* in epoll_wait(e1) */
	send_all(fd, "a", 1);
	await_peer();
	wait_state_for(t_srv, t_srv, 'S', 1000); /* in epoll_wait(e2) */
	msleep(300);
	send_all(fd, "b", 1);
	await_peer();
	close(fd);
	tell();
}

int main(void)
{
	return run(server, client);
}
