/* SPDX-License-Identifier: MIT */
/* MSG_PEEK|MSG_WAITALL on a socket with SO_RCVTIMEO: as without the
 * timeout (sem_peek_waitall_wait), the peek waits for the whole length
 * (within the timeout).  The second 10 come once the server sleeps in the
 * peek with the first 10 there (its state), not after a fixed time. */
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	struct timeval tv = { 2, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	tell();
	char buf[20];
	res("recv(20, MSG_PEEK|MSG_WAITALL), SO_RCVTIMEO 2 s", recv(fd, buf, 20, MSG_PEEK | MSG_WAITALL));
	res("recv(20, MSG_WAITALL)", recv(fd, buf, 20, MSG_WAITALL));
	await_peer();
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	await_peer_asleep();                    /* in the peek, nothing there */
	res("send 10", send(fd, "0123456789", 10, 0));
	await_peer_asleep();                    /* in the peek, 10 there */
	res("send 10", send(fd, "abcdefghij", 10, 0));
	tell();
	close(fd);
}

int main(void)
{
	return run(server, client);
}
