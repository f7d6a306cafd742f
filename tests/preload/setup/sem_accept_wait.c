/* SPDX-License-Identifier: MIT */
/* A blocking accept() that waits, as the kernel has it: a signal caught
 * without SA_RESTART fails it with EINTR; with SA_RESTART it goes on
 * waiting and returns the connection that comes later (on shared memory,
 * under the interposer: its accept spins a while before it sleeps, and
 * this connection comes after the spin); SO_RCVTIMEO on the listener ends
 * the wait with EAGAIN; a listener made nonblocking fails at once with
 * EAGAIN.  The client signals once the server is asleep in the accept
 * (its thread's state), not after a sleep a busy machine can outlast. */
#include "common.h"

static void server(int lfd)
{
	t_on_usr1(0);
	tell();                                 /* client: signal us in accept */
	res("accept, no SA_RESTART, signal", accept(lfd, NULL, NULL));
	say("handler ran: %s", yesno(t_caught == 1));
	t_on_usr1(SA_RESTART);
	tell();                                 /* client: signal, then connect */
	int fd = accept(lfd, NULL, NULL);
	say("accept, SA_RESTART, signal then a connection: %s", fd >= 0 ? "a socket" : ename(errno));
	say("handler ran: %s", yesno(t_caught == 2));
	if (fd < 0)
		fatal("accept");
	hs_server(fd);
	struct timeval tv = { 0, 100 * 1000 };
	res("SO_RCVTIMEO 100 ms", setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	long t0 = t_now_ms();
	res("accept, nobody connects", accept(lfd, NULL, NULL));
	say("waited the timeout: %s", yesno(t_now_ms() - t0 >= 90));
	res("O_NONBLOCK", fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK));
	res("accept, nonblocking, nobody", accept(lfd, NULL, NULL));
	tell();                                 /* client: done */
	res("recv at EOF", recv(fd, (char[1]){ 0 }, 1, 0));
	res("close", close(fd));
}

static void client(void)
{
	await_peer();
	await_peer_asleep();                    /* in the accept() */
	kill(getppid(), SIGUSR1);
	await_peer();
	await_peer_asleep();
	kill(getppid(), SIGUSR1);
	await_peer_asleep();                    /* woken by it, asleep again */
	int fd = client_conn();
	await_peer();
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
