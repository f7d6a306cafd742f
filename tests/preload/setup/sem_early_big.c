/* SPDX-License-Identifier: MIT */
/* A blocking send larger than the buffer that holds a client's bytes until
 * the server claims the connection, made right after connect() and before
 * the server accept()s: TCP takes it whole (send returns the full length);
 * the server, accepting 300 ms later, reads every byte in order. */
#include "common.h"

static void server(int lfd)
{
	msleep(300);
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	size_t got;
	uint64_t h = recv_count(fd, 100000, &got);
	say("received %zu, exact: %s", got, yesno(got == 100000 && h == pattern_ck(100000, 5)));
	res("send the answer", send(fd, "ok", 2, 0));
	res("close", close(fd));
}

static void client(void)
{
	int fd = raw_connect();
	char *buf = malloc(100000);
	pattern(buf, 100000, 0, 5);
	res("send 100000 right after connect", send(fd, buf, 100000, 0));
	free(buf);
	char a[8];
	res("recv the answer", recv(fd, a, sizeof(a), MSG_WAITALL));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
