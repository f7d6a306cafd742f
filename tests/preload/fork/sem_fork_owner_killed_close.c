/* SPDX-License-Identifier: MIT */
/* The client, which had forked an idle child holding the connection, is
 * killed with 3000 bytes of the server's unread; the child lives on.  The
 * server then closes the connection: as with the kernel, the child, which
 * has not touched the connection yet, reads those 3000 bytes, then EOF.
 * The server's close switches the connection to TCP first (re-sending
 * what the dead owner had not read), whether or not its control thread has
 * noticed the death yet.  Before: the close freed the connection on shared
 * memory and the child read EOF at once (1 run in 6); a switch in the
 * middle of the death's notice re-sent nothing; and the switch thread's
 * watch of the kernel socket (sem_fork_owner_killed_send) must let go of
 * a connection the program closed, or the child waits for our FIN. */
// expect: switched 2
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	send_pattern(fd, 3000, 9);
	say("sent 3000 the owner does not read");
	await_peer();                   /* the owner forked its child */
	tell();
	await_peer();                   /* the owner is dead */
	res("close", close(fd));
	tell();
}

static void client(void)
{
	int go[2], kp[2];
	if (pipe(go) < 0 || pipe(kp) < 0)
		fatal("pipe");
	pid_t owner = t_fork();
	if (owner == 0) {
		int fd = client_conn();
		pid_t kid = t_fork();
		if (kid == 0) {
			char c;
			if (read(go[0], &c, 1) != 1)    /* the server closed */
				_exit(2);
			size_t got;
			uint64_t h = recv_count(fd, 4000, &got);
			say("child: read %zu then EOF, exact: %s", got,
			    yesno(got == 3000 && h == pattern_ck(3000, 9)));
			fflush(t_out);
			_exit(0);
		}
		if (write(kp[1], &kid, sizeof(kid)) != sizeof(kid))
			fatal("write");
		for (;;)
			pause();
	}
	pid_t kid;
	if (read(kp[0], &kid, sizeof(kid)) != sizeof(kid))
		fatal("read");
	tell();                         /* the owner forked */
	await_peer();
	kill(owner, SIGKILL);
	waitpid(owner, NULL, 0);
	say("the owner killed, its child alive");
	tell();
	await_peer();                   /* the server closed */
	if (write(go[1], "x", 1) != 1)
		fatal("write");
	/* the child is not ours: wait for its pipe end to close */
	close(go[1]);
	close(kp[1]);
	while (kill(kid, 0) == 0 && t_state(kid, kid) != 'Z')
		msleep(5);
	say("the child is gone");
}

int main(void)
{
	return run(server, client);
}
