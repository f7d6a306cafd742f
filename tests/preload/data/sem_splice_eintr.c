/* SPDX-License-Identifier: MIT */
/* A signal caught while splice() waits for its pipe, as the kernel has it:
 * a handler without SA_RESTART ends the call with EINTR, one with
 * SA_RESTART lets it go on.  The server splices from an empty pipe into
 * its socket (the client writes into the pipe later), then from its
 * socket into a full 4 KiB pipe (the client drains the pipe later), then
 * from its empty socket into a pipe with room.  Nothing moves before the
 * call returns, and nothing is lost.  The pipes are made before the fork:
 * both processes hold both ends.  The client signals once the server is
 * asleep in the splice (its thread's state), not after a fixed time. */
#include "common.h"

static int a[2], b[2];          /* a: client -> server's splice; b: back */

static void server(int lfd)
{
	int fd = server_conn(lfd);
	t_on_usr1(0);
	tell();                                 /* client: signal us in the splice */
	res("splice from the empty pipe, no SA_RESTART, signal",
	    splice(a[0], NULL, fd, NULL, 100, 0));
	say("handler ran: %s", yesno(t_caught == 1));
	t_on_usr1(SA_RESTART);
	tell();                                 /* client: signal, then write 5 */
	res("splice from the empty pipe, SA_RESTART, signal then data",
	    splice(a[0], NULL, fd, NULL, 100, 0));
	say("handler ran: %s", yesno(t_caught == 2));

	static char fill[4096];
	if (fcntl(b[1], F_SETPIPE_SZ, 4096) != 4096 || write(b[1], fill, sizeof(fill)) != 4096)
		fatal("pipe b");
	await_peer();                           /* client sent 3 */
	wait_inq(fd, 3);
	t_on_usr1(0);
	tell();                                 /* client: signal us in the splice */
	res("splice into the full pipe, no SA_RESTART, signal",
	    splice(fd, NULL, b[1], NULL, 100, 0));
	say("handler ran: %s", yesno(t_caught == 3));
	t_on_usr1(SA_RESTART);
	tell();                                 /* client: signal, then drain the pipe */
	res("splice into the full pipe, SA_RESTART, signal then room",
	    splice(fd, NULL, b[1], NULL, 100, 0));
	say("handler ran: %s", yesno(t_caught == 4));

	t_on_usr1(0);
	tell();                                 /* client: signal us in the splice */
	res("splice from the empty socket, no SA_RESTART, signal",
	    splice(fd, NULL, b[1], NULL, 100, 0));
	say("handler ran: %s", yesno(t_caught == 5));
	tell();
	await_peer();
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	char buf[4096];
	await_peer();
	await_peer_asleep();                    /* in the splice */
	kill(getppid(), SIGUSR1);
	await_peer();
	await_peer_asleep();
	kill(getppid(), SIGUSR1);
	await_peer_asleep();                    /* woken by it, asleep again */
	res("write 5 into the pipe", write(a[1], "hello", 5));
	ssize_t n = recv_all(fd, buf, 5);
	say("received \"%.*s\"", (int)(n > 0 ? n : 0), buf);

	res("send 3", send(fd, "abc", 3, 0));
	tell();
	await_peer();
	await_peer_asleep();
	kill(getppid(), SIGUSR1);
	await_peer();
	await_peer_asleep();
	kill(getppid(), SIGUSR1);
	await_peer_asleep();
	res("drain the pipe", read(b[0], buf, sizeof(buf)));
	n = read(b[0], buf, sizeof(buf));
	say("then from the pipe \"%.*s\"", (int)(n > 0 ? n : 0), buf);

	await_peer();
	await_peer_asleep();
	kill(getppid(), SIGUSR1);
	await_peer();
	tell();
	res("close", close(fd));
}

int main(void)
{
	if (pipe(a) < 0 || pipe(b) < 0)
		fatal("pipe");
	return run(server, client);
}
