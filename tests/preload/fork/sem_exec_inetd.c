/* SPDX-License-Identifier: MIT */
/* inetd style: accept, fork, the connection on fds 0 and 1, exec a handler (head) before anything used it: the child claims it and switches it back to TCP at the exec, at once (no claim timeout), and the handler answers. */
// expect: switched 2
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now_s(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(void){
	int l=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={.sin_family=AF_INET}; a.sin_addr.s_addr=htonl(INADDR_LOOPBACK);
	socklen_t al=sizeof a; bind(l,(void*)&a,sizeof a); listen(l,16); getsockname(l,(void*)&a,&al);
	pid_t cl=fork();
	if(cl==0){ close(l); int c=socket(AF_INET,SOCK_STREAM,0); double t0=now_s(); connect(c,(void*)&a,sizeof a);
		write(c,"request\n",8); char b[64]; ssize_t n=read(c,b,sizeof b); double dt=now_s()-t0;
		printf("client: echo %zd bytes, quick (<1 s): %s\n",n,dt<1?"yes":"no"); fprintf(stderr,"client took %.3f s\n",dt); fflush(stdout); close(c); _exit(0);}
	/* inetd: accept, fork, the connection on 0/1, exec the handler */
	int s=accept(l,0,0);
	pid_t h=fork();
	if(h==0){ dup2(s,0); dup2(s,1); close(s); close(l); execlp("head","head","-n1",(char*)NULL); _exit(127);}
	close(s);
	waitpid(cl,0,0); waitpid(h,0,0); return 0;
}
