/* SPDX-License-Identifier: MIT */
/* A TCP connection over loopback within one process, 64 KiB each way, with
 * the C library's calls only (the program's references are versioned:
 * recv@GLIBC_2.2.5...).  Prints "ok" and, if it was built with the C API
 * (-DWITH_API, linked with libshortcut), what sc_stats_get and a C API
 * stream say: "api hello accelerated N".  Exit 1 with the step that failed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef WITH_API
#include <shortcut.h>
#endif

#define LEN (64 << 10)

static void fail(const char *what)
{
	perror(what);
	exit(1);
}

/* n bytes from fd into buf, or exit */
static void take(int fd, char *buf, size_t n, int use_recv)
{
	for (size_t got = 0; got < n;) {
		ssize_t k = use_recv ? recv(fd, buf + got, n - got, 0) : read(fd, buf + got, n - got);
		if (k <= 0)
			fail(use_recv ? "recv" : "read");
		got += (size_t)k;
	}
}

/* LEN bytes each way, 4 KiB at a time: the client sends, the server
 * echoes (send/recv one way, write/read the other) */
static void exchange(int c, int s)
{
	static char out[LEN], back[LEN], chunk[4096];
	for (int i = 0; i < LEN; i++)
		out[i] = (char)(i * 7 + 3);
	for (size_t done = 0; done < LEN; done += sizeof(chunk)) {
		if (send(c, out + done, sizeof(chunk), 0) != (ssize_t)sizeof(chunk))
			fail("send");
		take(s, chunk, sizeof(chunk), 1);
		if (write(s, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
			fail("write");
		take(c, back + done, sizeof(chunk), 0);
	}
	if (memcmp(out, back, LEN))
		fail("the bytes that came back differ");
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, al) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		fail("listen");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, al) < 0)
		fail("connect");
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail("accept");
	exchange(c, s);
	close(c);
	close(s);
	close(l);
	printf("ok\n");
#ifdef WITH_API
	char name[64], buf[6] = { 0 };
	struct sc_listener *sl;
	struct sc_conn *sc, *cc;
	struct sc_stats st;
	snprintf(name, sizeof(name), "@shortcut-test-%d", (int)getpid());
	if (sc_listen(name, 0, &sl) || sc_connect(name, &cc, 0) || sc_accept(sl, &sc, 0))
		fail("sc_listen, sc_connect, sc_accept");
	if (sc_send(cc, "hello", 6, 0) != 6 || sc_recv(sc, buf, 6, SC_WAITALL) != 6)
		fail("sc_send, sc_recv");
	sc_stats_get(&st);
	printf("api %s accelerated %llu\n", buf, (unsigned long long)st.conns_accelerated);
	sc_close(cc);
	sc_close(sc);
	sc_listener_close(sl);
#endif
	return 0;
}
