/* SPDX-License-Identifier: MIT */
/* One thread sends 8 MiB while another thread of the same process receives
 * 8 MiB on the same fd (the peer echoes); checksums equal. */
#include "common.h"
#include <pthread.h>

#define TOTAL (8u << 20)

static int cfd;
static uint64_t sent_ck, recv_ck;
static size_t recv_n;

static void *sender(void *arg)
{
	(void)arg;
	sent_ck = send_pattern(cfd, TOTAL, 13);
	return NULL;
}

static void *receiver(void *arg)
{
	(void)arg;
	recv_ck = recv_count(cfd, TOTAL, &recv_n);
	return NULL;
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	static char buf[65536];
	size_t total = 0;
	uint64_t h = CK_INIT;
	ssize_t n;
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		h = ck(h, buf, (size_t)n);
		if (send_all(fd, buf, (size_t)n) != n)
			fatal("echo");
		total += (size_t)n;
	}
	res("last recv", n);
	say("echoed %zu bytes, checksum ok: %s", total, yesno(h == pattern_ck(TOTAL, 13)));
	res("close", close(fd));
}

static void client(void)
{
	pthread_t a, b;
	cfd = client_conn();
	if (pthread_create(&b, NULL, receiver, NULL) || pthread_create(&a, NULL, sender, NULL))
		fatal("pthread_create");
	pthread_join(a, NULL);
	say("sent %u bytes", TOTAL);
	pthread_join(b, NULL);
	say("received %zu bytes, equal to what was sent: %s", recv_n,
	    yesno(recv_n == TOTAL && recv_ck == sent_ck));
	res("shutdown(SHUT_WR)", shutdown(cfd, SHUT_WR));
	char c;
	res("recv at EOF", recv(cfd, &c, 1, 0));
	res("close", close(cfd));
}

int main(void)
{
	return run(server, client);
}
