/* An epoll set shared across fork: the child waits in it while the parent's
 * accelerated entry has data the parent has not collected. */
#include "common.c"
#include <sys/epoll.h>
#include <sys/resource.h>
static double cpu(void){struct rusage u;getrusage(RUSAGE_SELF,&u);return u.ru_utime.tv_sec+u.ru_stime.tv_sec+(u.ru_utime.tv_usec+u.ru_stime.tv_usec)/1e6;}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	int o = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 7 }, out[2];
	res("ctl", epoll_ctl(o, EPOLL_CTL_ADD, fd, &ev));
	res("epoll_wait(0)", epoll_wait(o, out, 2, 0));
	/* arm: a wait that sleeps briefly */
	res("epoll_wait(50)", epoll_wait(o, out, 2, 50));
	tell();           /* client sends one byte */
	await_peer();
	msleep(50);
	pid_t p = fork();
	if (p == 0) {
		double c0 = cpu();
		int n = epoll_wait(o, out, 2, 500);
		fprintf(stderr, "child: epoll_wait = %d, cpu %.3f s in 500 ms\n", n, cpu() - c0);
		_exit(0);
	}
	waitpid(p, NULL, 0);
	close(o); close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	send_all(fd, "a", 1);
	tell();
	msleep(800);
	close(fd);
}

int main(void) { return run(server, client); }
