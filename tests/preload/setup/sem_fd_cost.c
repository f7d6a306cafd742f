/* SPDX-License-Identifier: MIT */
/* What an established connection costs in fds: a client with 200 blocking
 * connections (each sends first and waits for the answer) holds about one
 * fd per connection, as on kernel TCP (under shortcut the eventfd a
 * pending client waits on goes once it settles, if it never went out to
 * a poller or an epoll set). */
#include <dirent.h>

#include "common.h"

#define N 200

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void server(int lfd)
{
	static int fds[N];
	char b;
	for (int i = 0; i < N; i++) {
		fds[i] = accept(lfd, NULL, NULL);
		if (fds[i] < 0 || recv(fds[i], &b, 1, MSG_WAITALL) != 1 || send(fds[i], &b, 1, 0) != 1)
			fatal("server: connection %d", i);
	}
	await_peer();
	for (int i = 0; i < N; i++)
		close(fds[i]);
	say("served %d connections", N);
}

static void client(void)
{
	static int fds[N];
	int before = count_fds();
	for (int i = 0; i < N; i++) {
		char b = (char)i;
		fds[i] = raw_connect();
		if (send(fds[i], &b, 1, 0) != 1 || recv(fds[i], &b, 1, MSG_WAITALL) != 1 || b != (char)i)
			fatal("client: connection %d", i);
	}
	int after = count_fds();
	double per = (double)(after - before) / N;
	say("%d connections, fds per connection at most 1.1: %s", N, yesno(per <= 1.1));
	if (per > 1.1)
		fprintf(stderr, "fds per connection: %.2f\n", per);
	tell();
	for (int i = 0; i < N; i++)
		close(fds[i]);
}

int main(void)
{
	return run(server, client);
}
