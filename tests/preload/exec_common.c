/* SPDX-License-Identifier: MIT */
/* The conversations of the programs that hand a connection to python3
 * (exec_common.h). */
#include "exec_common.h"

/* ---- exec_child_run ------------------------------------------------------ */

/* python: argv fd sync: tell the server it runs, read the server's stream
 * from 800 to 43800, send the client's stream from 10500 to 12500, shut
 * down writing, wait for EOF */
static const char child_py[] =
	"import os, socket, sys\n"
	"def pat(n, seed, off=0):\n"
	"    return bytes((((x + off) * 131 + seed + ((x + off) >> 9) + ((x + off) >> 17)) & 255) for x in range(n))\n"
	"fd, sync = int(sys.argv[1]), int(sys.argv[2])\n"
	"s = socket.socket(fileno=fd)\n"
	"s.settimeout(10)\n"
	"os.write(sync, b'x')\n"
	"want = pat(43000, 72, 800)\n"
	"got = b''\n"
	"try:\n"
	"    while len(got) < len(want):\n"
	"        b = s.recv(65536)\n"
	"        if not b: break\n"
	"        got += b\n"
	"except OSError as e:\n"
	"    print('client: python: recv error: %s' % type(e).__name__)\n"
	"print('client: python: received %d bytes, exact: %s' % (len(got), 'yes' if got == want else 'no'))\n"
	"s.sendall(pat(2000, 71, 10500))\n"
	"print('client: python: sent 2000')\n"
	"s.shutdown(socket.SHUT_WR)\n"
	"try:\n"
	"    print('client: python: recv at EOF = %d' % len(s.recv(100)))\n"
	"except OSError as e:\n"
	"    print('client: python: recv at EOF: %s' % type(e).__name__)\n"
	"s.close()\n";

static const char *child_how;
static pid_t (*child_start)(char *argv[]);

static void child_server(int lfd)
{
	int fd = server_conn(lfd);
	say("message (500), exact: %s", yesno(recv_exact_at(fd, 0, 500, 71)));
	send_at(fd, 0, 800, 72);
	await_peer();                           /* the client sent 10000 more */
	send_at(fd, 800, 40000, 72);
	say("sent 40000 the client has not read");
	tell();
	await_peer();                           /* python runs */
	send_at(fd, 40800, 3000, 72);
	say("sent 3000 after python started");
	static char buf[12001], want[12000];
	pattern(want, sizeof(want), 500, 71);
	ssize_t n = recv_all(fd, buf, sizeof(buf));
	say("received %zd bytes up to EOF, exact (client's 10000, python's 2000): %s", n,
	    yesno(n == 12000 && !memcmp(buf, want, sizeof(want))));
	res("close", close(fd));
}

static void child_client(void)
{
	int fd = client_conn();
	send_at(fd, 0, 500, 71);
	say("answer (800), exact: %s", yesno(recv_exact_at(fd, 0, 800, 72)));
	send_at(fd, 500, 10000, 71);
	say("sent 10000 the server has not read");
	tell();
	await_peer();                           /* the server sent 40000 */
	char a_fd[16], a_sync[16];
	snprintf(a_fd, sizeof(a_fd), "%d", fd);
	snprintf(a_sync, sizeof(a_sync), "%d", t_c2p[1]);
	say("%s", child_how);
	fflush(t_out);
	char *argv[] = { "python3", "-c", (char *)child_py, a_fd, a_sync, NULL };
	pid_t pid = child_start(argv);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		fatal("waitpid");
	say("python exited 0: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
	res("close the copy it kept (never touched)", close(fd));
}

int exec_child_run(const char *how, pid_t (*start)(char *argv[]))
{
	child_how = how;
	child_start = start;
	return run(child_server, child_client);
}

/* ---- exec_inflight_run --------------------------------------------------- */

/* python: argv fd syncfd skip total coff n: tell the server it runs, read
 * the server's stream from offset skip to total (seed 16), send n bytes of
 * the client's stream from offset coff (seed 17), shut down, wait for EOF */
static const char inflight_py[] =
	"import os, socket, sys\n"
	"def pat(n, seed, off=0):\n"
	"    return bytes((((x + off) * 131 + seed + ((x + off) >> 9) + ((x + off) >> 17)) & 255) for x in range(n))\n"
	"fd, sync, skip, total, coff, n = map(int, sys.argv[1:7])\n"
	"s = socket.socket(fileno=fd)\n"
	"s.settimeout(5)\n"
	"os.write(sync, b'x')\n"
	"want = pat(total - skip, 16, skip)\n"
	"got = b''\n"
	"try:\n"
	"    while len(got) < len(want):\n"
	"        b = s.recv(65536)\n"
	"        if not b: break\n"
	"        got += b\n"
	"except OSError as e:\n"
	"    print('client: recv error: %s' % type(e).__name__)\n"
	"print('client: python received %d bytes, exact: %s' % (len(got), 'yes' if got == want else 'no'))\n"
	"s.sendall(pat(n, 17, coff))\n"
	"s.shutdown(socket.SHUT_WR)\n"
	"try:\n"
	"    print('client: recv at EOF = %d' % len(s.recv(100)))\n"
	"except OSError as e:\n"
	"    print('client: recv at EOF: %s' % type(e).__name__)\n"
	"s.close()\n";

static size_t inflight_skip;
static bool inflight_keep;

static void inflight_server(int lfd)
{
	int fd = server_conn(lfd);
	send_pattern(fd, 100000, 16);
	say("sent 100000 before the exec");
	tell();
	await_peer();                           /* python runs */
	char buf[2000];
	pattern(buf, sizeof(buf), 100000, 16);
	res("send 2000 after the exec", send_all(fd, buf, sizeof(buf)));
	size_t got;
	uint64_t h = recv_count(fd, 70501, &got);
	say("received %zu bytes up to EOF, exact: %s", got,
	    yesno(got == 70500 && h == pattern_ck(70500, 17)));
	res("close", close(fd));
}

static void inflight_client(void)
{
	int fd = client_conn();
	send_pattern(fd, 70000, 17);
	say("sent 70000 before the exec");
	if (inflight_skip) {
		static char part[65536], want[65536];
		size_t n = inflight_skip;
		pattern(want, n, 0, 16);
		res("read part of the server's bytes", recv_all(fd, part, n));
		say("exact: %s", yesno(!memcmp(part, want, n)));
	}
	await_peer();                           /* the server sent 100000 */
	char a_fd[16], a_sync[16], a_skip[24];
	snprintf(a_fd, sizeof(a_fd), "%d", fd);
	snprintf(a_sync, sizeof(a_sync), "%d", t_c2p[1]);
	snprintf(a_skip, sizeof(a_skip), "%zu", inflight_skip);
	say("exec python3 with the connected fd, %s",
	    inflight_keep ? "LD_PRELOAD kept" : "without the library");
	char *argv[] = { "python3", "-c", (char *)inflight_py, a_fd, a_sync, a_skip, "102000",
			 "70000", "500", NULL };
	exec_python(argv, inflight_keep);
}

int exec_inflight_run(size_t skip, bool keep_preload)
{
	if (skip > 65536)
		fatal("exec_inflight_run: skip %zu", skip);
	inflight_skip = skip;
	inflight_keep = keep_preload;
	return run(inflight_server, inflight_client);
}

/* ---- echo_exec_client ---------------------------------------------------- */

static const size_t echo_msgs[] = { 100, 3000, 20000, 40000 };
#define INFLIGHT1 7000          /* sent on 1 before the exec; 1000 of its echo read */
#define INFLIGHT1_READ 1000

/* python: argv lcg [name fd sent echoed seed]...: reads the echoes of
 * [echoed, sent) on each connection, then rounds of one message per
 * connection (sizes from an LCG starting at lcg) until 200000 bytes are
 * sent, each echo checked; closes both */
static const char echo_py[] =
	"import socket, sys\n"
	"B = [bytes(((i * 131) + c) & 255 for i in range(512)) for c in range(256)]\n"
	"def pat(off, n, seed):\n"
	"    if n <= 0: return b''\n"
	"    k0, k1 = off >> 9, (off + n - 1) >> 9\n"
	"    s = b''.join(B[(seed + k + (k >> 8)) & 255] for k in range(k0, k1 + 1))\n"
	"    o = off - (k0 << 9)\n"
	"    return s[o:o + n]\n"
	"def recvn(s, n):\n"
	"    got = bytearray()\n"
	"    while len(got) < n:\n"
	"        b = s.recv(min(n - len(got), 1 << 20))\n"
	"        if not b: break\n"
	"        got += b\n"
	"    return bytes(got)\n"
	"a = sys.argv[2:]\n"
	"conns = []\n"
	"for i in range(0, len(a), 5):\n"
	"    s = socket.socket(fileno=int(a[i + 1]))\n"
	"    s.settimeout(10)\n"
	"    conns.append([a[i], s, int(a[i + 2]), int(a[i + 3]), int(a[i + 4])])\n"
	"for c in conns:\n"
	"    got = recvn(c[1], c[2] - c[3])\n"
	"    print('client: python: connection %s: the pending echo, %d bytes, exact: %s'\n"
	"          % (c[0], len(got), 'yes' if got == pat(c[3], c[2] - c[3], c[4]) else 'no'))\n"
	"    c[3] += len(got)\n"
	"x, total, rounds, ok = int(sys.argv[1]), 0, 0, True\n"
	"while total < 200000:\n"
	"    sizes = []\n"
	"    for c in conns:\n"
	"        x = (x * 1103515245 + 12345) & 0x7fffffff\n"
	"        n = 1 + x % 30000\n"
	"        c[1].sendall(pat(c[2], n, c[4]))\n"
	"        c[2] += n\n"
	"        total += n\n"
	"        sizes.append(n)\n"
	"    for c, n in zip(conns, sizes):\n"
	"        got = recvn(c[1], n)\n"
	"        ok = ok and got == pat(c[3], n, c[4])\n"
	"        c[3] += len(got)\n"
	"    rounds += 1\n"
	"print('client: python: %d rounds, %d bytes sent, every echo exact: %s'\n"
	"      % (rounds, total, 'yes' if ok else 'no'))\n"
	"for c in conns:\n"
	"    print('client: python: connection %s: %d bytes sent in all, %d echoed' % (c[0], c[2], c[3]))\n"
	"    c[1].close()\n";

void echo_exec_client(unsigned seed, unsigned lcg, size_t inflight2, void (*sent2)(int fd2))
{
	int fd[2] = { client_conn(), client_conn() };
	size_t off[2] = { 0, 0 };
	for (size_t m = 0; m < sizeof(echo_msgs) / sizeof(echo_msgs[0]); m++)
		for (int i = 0; i < 2; i++) {
			send_at(fd[i], off[i], echo_msgs[m], seed + (unsigned)i);
			say("connection %d: sent %zu, echo exact: %s", i + 1, echo_msgs[m],
			    yesno(recv_exact_at(fd[i], off[i], echo_msgs[m], seed + (unsigned)i)));
			off[i] += echo_msgs[m];
		}
	/* echoes left in flight */
	send_at(fd[0], off[0], INFLIGHT1, seed);
	say("connection 1: sent %d, first %d of the echo exact: %s", INFLIGHT1, INFLIGHT1_READ,
	    yesno(recv_exact_at(fd[0], off[0], INFLIGHT1_READ, seed)));
	size_t echoed0 = off[0] + INFLIGHT1_READ;
	off[0] += INFLIGHT1;
	send_at(fd[1], off[1], inflight2, seed + 1);
	sent2(fd[1]);
	size_t echoed1 = off[1];
	off[1] += inflight2;

	char args[11][24];
	snprintf(args[0], 24, "%u", lcg);
	for (int i = 0; i < 2; i++) {
		snprintf(args[1 + 5 * i], 24, "%d", i + 1);
		snprintf(args[2 + 5 * i], 24, "%d", fd[i]);
		snprintf(args[3 + 5 * i], 24, "%zu", off[i]);
		snprintf(args[4 + 5 * i], 24, "%zu", i ? echoed1 : echoed0);
		snprintf(args[5 + 5 * i], 24, "%u", seed + (unsigned)i);
	}
	say("exec python3 with both fds, without the library");
	fflush(t_out);
	if (dup2(fileno(t_out), 1) < 0)
		fatal("dup2");
	unsetenv("LD_PRELOAD");
	char *argv[] = { "python3", "-c", (char *)echo_py, args[0], args[1], args[2], args[3],
			 args[4], args[5], args[6], args[7], args[8], args[9], args[10], NULL };
	execv("/usr/bin/python3", argv);
	fatal("exec python3");
}
