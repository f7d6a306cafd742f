/* SPDX-License-Identifier: MIT */
/* An accepted connection used first by two threads at once: one sends,
 * the other receives (a server that starts a writer thread right after
 * accept).  The first use claims the client's offer; a thread that came
 * in during the claim used to see the connection as TCP already and sent
 * its bytes to the kernel socket, which the client on shared memory never
 * reads: both sides hung (found by test_soak.py's mid-switch soak).
 *
 * 100 connections, each: the server's two threads start together (a
 * barrier) right after accept; the writer sends 50,000 pattern bytes,
 * the reader receives the client's 50,000; the client sends its bytes,
 * then reads the server's.  Every byte checked. */
#include "common.h"
#include <pthread.h>

#define NCONN 100
#define LEN 50000

static pthread_barrier_t go;
static int conn_fd;
static bool sent_ok;

static void *writer(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&go);
	static char buf[LEN];
	pattern(buf, LEN, 0, 21);
	sent_ok = send_all(conn_fd, buf, LEN) == LEN;
	return NULL;
}

static void server(int lfd)
{
	bool all_sent = true, all_got = true;
	for (int i = 0; i < NCONN; i++) {
		conn_fd = accept(lfd, NULL, NULL);
		if (conn_fd < 0)
			fatal("accept");
		pthread_t t;
		pthread_barrier_init(&go, NULL, 2);
		if (pthread_create(&t, NULL, writer, NULL))
			fatal("pthread_create");
		pthread_barrier_wait(&go);
		size_t got;
		all_got = recv_count(conn_fd, LEN, &got) == pattern_ck(LEN, 22) && got == LEN &&
			  all_got;
		pthread_join(t, NULL);
		pthread_barrier_destroy(&go);
		all_sent = all_sent && sent_ok;
		await_peer();                   /* the client read it all */
		close(conn_fd);
	}
	say("%d connections: sent by the writer thread: %s, received by the main thread "
	    "exact: %s", NCONN, yesno(all_sent), yesno(all_got));
}

static void client(void)
{
	bool ok = true;
	for (int i = 0; i < NCONN; i++) {
		int fd = raw_connect();
		send_pattern(fd, LEN, 22);
		size_t got;
		ok = recv_count(fd, LEN, &got) == pattern_ck(LEN, 21) && got == LEN && ok;
		tell();
		close(fd);
	}
	say("%d connections: the server's bytes exact: %s", NCONN, yesno(ok));
}

int main(void)
{
	return run(server, client);
}
