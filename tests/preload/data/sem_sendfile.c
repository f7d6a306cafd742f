/* SPDX-License-Identifier: MIT */
/* sendfile() of a 3 MiB file to the socket: in chunks with an offset
 * pointer (the file position does not move), then without (it does), then
 * past the end (0); the peer checks totals and checksums. */
#include "common.h"
#include <sys/sendfile.h>

#define FSIZE (3u << 20)

static void server(int lfd)
{
	int fd = server_conn(lfd);
	int f = pattern_file("sem_sendfile", FSIZE, 11);
	lseek(f, 0, SEEK_SET);

	off_t off = 0;
	size_t total = 0;
	ssize_t n;
	while ((n = sendfile(fd, f, &off, 256 * 1024)) > 0)
		total += (size_t)n;
	res("last sendfile with offset", n);
	say("sent %zu with offset pointer, offset now %lld, file position %lld", total,
	    (long long)off, (long long)lseek(f, 0, SEEK_CUR));

	total = 0;
	while ((n = sendfile(fd, f, NULL, 1000000)) > 0)
		total += (size_t)n;
	res("last sendfile without offset", n);
	say("sent %zu without offset pointer, file position %lld", total,
	    (long long)lseek(f, 0, SEEK_CUR));

	off = FSIZE - 1000;
	res("sendfile across the end", sendfile(fd, f, &off, 5000));
	say("offset now %lld", (long long)off);
	off = 0;
	res("sendfile of 0 bytes", sendfile(fd, f, &off, 0));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	await_peer();
	res("sendfile from the socket to itself", sendfile(fd, fd, NULL, 10));
	close(f);
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	size_t got;
	uint64_t h = recv_count(fd, FSIZE, &got);
	say("first copy: %zu bytes, checksum ok: %s", got, yesno(h == pattern_ck(FSIZE, 11)));
	h = recv_count(fd, FSIZE, &got);
	say("second copy: %zu bytes, checksum ok: %s", got, yesno(h == pattern_ck(FSIZE, 11)));
	static char tail[10000];
	ssize_t n = recv_all(fd, tail, sizeof(tail));
	res("tail (to EOF)", n);
	char want[1000];
	pattern(want, 1000, FSIZE - 1000, 11);
	say("tail is the file's last 1000 bytes: %s", yesno(n == 1000 && !memcmp(tail, want, 1000)));
	tell();
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
