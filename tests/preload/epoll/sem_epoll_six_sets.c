/* SPDX-License-Identifier: MIT */
/* One connection in six epoll sets of one process; the first set is not
 * waiting (its program is busy elsewhere) and a wait in the sixth sleeps:
 * data must wake the sixth set, as it wakes the second to fifth
 * (sem_epoll_second_set, sem_epoll_sets3).  The client sends once the
 * server sleeps in the sixth set (its state; after 1 s anyway). */
// expect: xfail a connection's sixth epoll set is woken only while its first set waits (docs/limits.md, epoll)
#include "common.h"
#include <sys/epoll.h>

enum { SETS = 6 };

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64], label[64];
	int ep[SETS];
	struct epoll_event ev, out[4];
	for (int i = 0; i < SETS; i++) {
		if ((ep[i] = epoll_create1(0)) < 0)
			fatal("epoll_create1");
		ev.events = EPOLLIN;
		ev.data.u64 = (uint64_t)i + 1;
		snprintf(label, sizeof(label), "set %d: ADD C", i + 1);
		res(label, epoll_ctl(ep[i], EPOLL_CTL_ADD, fd, &ev));
	}
	for (int i = 0; i < SETS; i++) {
		snprintf(label, sizeof(label), "set %d, idle: epoll_wait(0)", i + 1);
		res(label, epoll_wait(ep[i], out, 4, 0));
	}
	tell();                                 /* the client sends 1 byte while set 6 waits */
	int n = epoll_wait(ep[SETS - 1], out, 4, 3000);
	res("set 6 sleeping, C gets 1: epoll_wait(3000)", n);
	say("event for set 6's registration: %s", yesno(n == 1 && out[0].data.u64 == SETS));
	res("recv", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	tell();
	await_peer();
	for (int i = 0; i < SETS; i++)
		close(ep[i]);
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	wait_state_for(t_srv, t_srv, 'S', 1000); /* in epoll_wait(set 6) */
	send_all(fd, "a", 1);
	await_peer();
	close(fd);
	tell();
}

int main(void)
{
	return run(server, client);
}
