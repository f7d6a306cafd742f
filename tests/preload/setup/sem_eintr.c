/* SPDX-License-Identifier: MIT */
/* A signal caught while a blocking recv() waits: with a handler installed
 * without SA_RESTART the call fails with EINTR; with SA_RESTART it goes on
 * waiting and returns the data that comes later, as the kernel has it for a
 * socket without a timeout.  The same with MSG_WAITALL after part of the
 * data came: the bytes received so far are returned.  The client signals
 * once the server is asleep in the recv() (its thread's state), not after
 * a sleep a busy machine can outlast; for the MSG_WAITALL case, once its
 * 3 bytes have reached the server (SIOCOUTQ 0: acknowledged by the
 * kernel, taken by the reader under the interposer) and the server sleeps
 * again after taking them. */
#include "common.h"
#include <linux/sockios.h>

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];
	t_on_usr1(0);
	tell();                                 /* client: signal us in the recv */
	res("recv, no SA_RESTART, signal", recv(fd, buf, sizeof(buf), 0));
	say("handler ran: %s", yesno(t_caught == 1));
	t_on_usr1(SA_RESTART);
	tell();                                 /* client: signal, then send 5 */
	res("recv, SA_RESTART, signal then data", recv(fd, buf, sizeof(buf), 0));
	say("handler ran: %s", yesno(t_caught == 2));
	t_on_usr1(0);
	tell();                                 /* client: 3 bytes, then signal */
	res("recv(10, MSG_WAITALL), 3 came, no SA_RESTART, signal",
	    recv(fd, buf, 10, MSG_WAITALL));
	say("handler ran: %s", yesno(t_caught == 3));
	tell();
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	await_peer_asleep();                    /* in the recv() */
	kill(getppid(), SIGUSR1);
	await_peer();
	await_peer_asleep();
	kill(getppid(), SIGUSR1);
	await_peer_asleep();                    /* woken by it, asleep again */
	res("send 5", send(fd, "hello", 5, 0));
	await_peer();
	await_peer_asleep();
	res("send 3", send(fd, "abc", 3, 0));
	long t0 = t_now_ms();
	for (int q = -1; ioctl(fd, SIOCOUTQ, &q) < 0 || q > 0; msleep(1))
		if (t_now_ms() - t0 > T_GUARD_MS)
			fatal("the 3 bytes never left (SIOCOUTQ %d)", q);
	await_peer_asleep();                    /* took them, waits for 7 more */
	kill(getppid(), SIGUSR1);
	await_peer();
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
