/* SPDX-License-Identifier: MIT */
/* The process that set a connection up forks and exits at once (_exit, as
 * daemon() does), leaving the connection to its child, with bytes in flight
 * both ways: the server's 30000 the owner never read, the owner's 10000 the
 * server has not read yet.  As with the kernel, nothing ends: the child
 * reads the 30000 (exact) and what the server sends next, sends its own,
 * and closes; the server gets the owner's 10000 then the child's 5000, in
 * order, then EOF.  The owner's death is taken as a switch back to TCP
 * (it had forked): both halves switch. */
// expect: switched 2
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	send_pattern(fd, 30000, 3);
	say("sent 30000 the owner does not read");
	tell();
	await_peer();                           /* the owner is gone, the child runs */
	char buf[3000];
	pattern(buf, 3000, 30000, 3);
	res("send 3000 more", send_all(fd, buf, 3000));
	size_t got;
	uint64_t h = recv_count(fd, 15001, &got);
	/* the owner's 10000 (seed 8) then the child's 5000 (seed 8, offset 10000) */
	say("received %zu up to EOF, exact: %s", got, yesno(got == 15000 && h == pattern_ck(15000, 8)));
	res("close", close(fd));
}

static void client(void)
{
	int done[2];
	if (pipe(done) < 0)
		fatal("pipe");
	pid_t owner = t_fork();
	if (owner == 0) {
		close(done[0]);
		int fd = client_conn();
		await_peer();                   /* the server sent 30000 */
		send_pattern(fd, 10000, 8);
		say("owner: sent 10000, forks and exits");
		pid_t kid = t_fork();
		if (kid > 0)
			_exit(0);
		/* the child: wait until the owner is gone */
		while (getppid() == getpid() || kill(getppid(), 0) == 0) {
			if (getppid() == 1)
				break;
			msleep(10);
		}
		msleep(100);
		tell();                         /* server: send 3000 more */
		size_t got;
		uint64_t h = recv_count(fd, 33000, &got);
		say("child: received %zu, exact: %s", got, yesno(got == 33000 && h == pattern_ck(33000, 3)));
		char buf[5000];
		pattern(buf, 5000, 10000, 8);
		res("child: send 5000", send_all(fd, buf, 5000));
		res("child: close", close(fd));
		if (write(done[1], "x", 1) != 1)
			fatal("write");
		_exit(0);
	}
	close(done[1]);
	int st;
	waitpid(owner, &st, 0);
	char c;
	say("child ran to the end: %s", yesno(read(done[0], &c, 1) == 1));
}

int main(void)
{
	return run(server, client);
}
