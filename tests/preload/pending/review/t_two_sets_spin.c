/* One connection in two epoll sets: the first set's epoll_wait returned
 * (its program is busy), the second sleeps: data must wake the second. */
#include "common.c"
#include <sys/epoll.h>
#include <sys/resource.h>
static double cpu(void){struct rusage u;getrusage(RUSAGE_SELF,&u);return u.ru_utime.tv_sec+u.ru_stime.tv_sec+(u.ru_utime.tv_usec+u.ru_stime.tv_usec)/1e6;}

static uint64_t ms_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec*1000ull + t.tv_nsec/1000000; }

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];
	int e1 = epoll_create1(0), e2 = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 }, out[2];
	res("ctl e1", epoll_ctl(e1, EPOLL_CTL_ADD, fd, &ev));
	ev.data.u32 = 2;
	res("ctl e2", epoll_ctl(e2, EPOLL_CTL_ADD, fd, &ev));
	tell();                                 /* client: sends 1 byte in 50 ms */
	res("epoll_wait(e1)", epoll_wait(e1, out, 2, 3000));
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("epoll_wait(e2, 0)", epoll_wait(e2, out, 2, 0));
	tell();                                 /* client: sends 1 byte in 100 ms */
	uint64_t t0 = ms_now(); double c0 = cpu();
	res("epoll_wait(e2, 3000)", epoll_wait(e2, out, 2, 3000));
	uint64_t el = ms_now() - t0;
	say("e2 woke within 1 s: %s", yesno(el < 1000));
	fprintf(stderr, "elapsed %llu ms cpu %.3f s\n", (unsigned long long)el, cpu()-c0);
	res("recv", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	await_peer();
	close(e1); close(e2);
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	msleep(50);
	send_all(fd, "a", 1);
	await_peer();
	msleep(1000);
	send_all(fd, "b", 1);
	msleep(100);
	tell();
	msleep(100);
	close(fd);
}

int main(void) { return run(server, client); }
