/* SPDX-License-Identifier: MIT */
/* What the kernel refuses to move between a socket and a file or pipe, it
 * refuses before it moves a byte: splice needs a pipe on one side and no
 * offset on the socket's (EINVAL) nor the pipe's (ESPIPE), a readable
 * source (EBADF) and known flags; sendfile reads only a file (EINVAL, or
 * ESPIPE with an offset), and into a pipe only without an offset;
 * copy_file_range takes files only, vmsplice pipes only.  After each, the
 * file position, the pipe and the socket hold what they held: the server
 * receives only the closing "end", the client the server's 5 bytes. */
#include "common.h"
#include <sys/sendfile.h>
#include <sys/uio.h>

static void server(int lfd)
{
	int fd = server_conn(lfd);
	res("send 5", send(fd, "hello", 5, 0));
	char buf[64];
	ssize_t n = recv_all(fd, buf, 3);
	say("received \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("recv at the end", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	wait_inq(fd, 5);
	char path[] = "/tmp/sem_splice_refused.XXXXXX";
	int f = mkstemp(path);
	if (f < 0 || write(f, "0123456789abcdef", 16) != 16)
		fatal("file");
	unlink(path);
	lseek(f, 0, SEEK_SET);
	int p[2];
	if (pipe(p) < 0 || write(p[1], "pipe!", 5) != 5)
		fatal("pipe");
	loff_t lo = 0;
	off_t off = 0;
	struct iovec v = { "xyz", 3 };

	res("splice file -> socket", splice(f, NULL, fd, NULL, 10, 0));
	res("splice socket -> file", splice(fd, NULL, f, NULL, 10, 0));
	res("splice socket -> socket", splice(fd, NULL, fd, NULL, 10, 0));
	res("splice pipe -> socket, offset on the socket", splice(p[0], NULL, fd, &lo, 10, 0));
	res("splice pipe -> socket, offset on the pipe", splice(p[0], &lo, fd, NULL, 10, 0));
	res("splice socket -> pipe, offset on the socket", splice(fd, &lo, p[1], NULL, 10, 0));
	res("splice socket -> pipe, offset on the pipe", splice(fd, NULL, p[1], &lo, 10, 0));
	res("splice from the pipe's write end", splice(p[1], NULL, fd, NULL, 10, 0));
	res("splice into the pipe's read end", splice(fd, NULL, p[0], NULL, 10, 0));
	res("splice with an unknown flag", splice(p[0], NULL, fd, NULL, 10, 0x100));
	res("splice of 0 bytes", splice(p[0], NULL, fd, NULL, 0, 0));
	res("sendfile pipe -> socket", sendfile(fd, p[0], NULL, 10));
	res("sendfile pipe -> socket with an offset", sendfile(fd, p[0], &off, 10));
	res("sendfile socket -> pipe with an offset", sendfile(p[1], fd, &off, 10));
	res("sendfile socket -> socket", sendfile(fd, fd, NULL, 10));
	res("sendfile socket -> file", sendfile(f, fd, NULL, 10));
	res("copy_file_range file -> socket", copy_file_range(f, NULL, fd, NULL, 10, 0));
	res("copy_file_range socket -> file", copy_file_range(fd, NULL, f, NULL, 10, 0));
	res("copy_file_range pipe -> socket", copy_file_range(p[0], NULL, fd, NULL, 10, 0));
	res("vmsplice into the socket", vmsplice(fd, &v, 1, 0));
	say("file position %lld, pipe holds %d, socket holds %d", (long long)lseek(f, 0, SEEK_CUR),
	    readable_bytes(p[0]), readable_bytes(fd));
	res("send 3", send(fd, "end", 3, 0));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	char buf[16];
	ssize_t n = recv_all(fd, buf, sizeof(buf));
	say("received \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	close(f);
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
