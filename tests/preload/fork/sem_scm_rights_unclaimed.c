/* SPDX-License-Identifier: MIT */
/* An accepted connection nobody used yet, passed with SCM_RIGHTS: settled and switched first, at once (no claim timeout); the receiver answers. */
// expect: switched 2
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now_s(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void sendfd(int u,int fd){ char c='f'; struct iovec v={&c,1}; union{char b[CMSG_SPACE(sizeof(int))];struct cmsghdr a;}cb; struct msghdr m={0}; m.msg_iov=&v;m.msg_iovlen=1;m.msg_control=cb.b;m.msg_controllen=sizeof cb.b; struct cmsghdr*cm=CMSG_FIRSTHDR(&m); cm->cmsg_level=SOL_SOCKET;cm->cmsg_type=SCM_RIGHTS;cm->cmsg_len=CMSG_LEN(sizeof(int)); memcpy(CMSG_DATA(cm),&fd,sizeof fd); if(sendmsg(u,&m,0)<0) perror("sendmsg");}
static int recvfd(int u){ char c; struct iovec v={&c,1}; union{char b[CMSG_SPACE(sizeof(int))];struct cmsghdr a;}cb; struct msghdr m={0}; m.msg_iov=&v;m.msg_iovlen=1;m.msg_control=cb.b;m.msg_controllen=sizeof cb.b; if(recvmsg(u,&m,0)<=0) return -1; int fd; memcpy(&fd,CMSG_DATA(CMSG_FIRSTHDR(&m)),sizeof fd); return fd;}
int main(void){
	int l=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={.sin_family=AF_INET}; a.sin_addr.s_addr=htonl(INADDR_LOOPBACK);
	socklen_t al=sizeof a; bind(l,(void*)&a,sizeof a); listen(l,16); getsockname(l,(void*)&a,&al);
	int sp[2]; socketpair(AF_UNIX,SOCK_STREAM,0,sp);
	pid_t w=fork();
	if(w==0){ /* worker: gets accepted connections over sp[1] */
		close(l); int fd=recvfd(sp[1]); char b[64]; ssize_t n=read(fd,b,sizeof b); if(n>0) write(fd,"response",8); close(fd); _exit(0);}
	pid_t cl=fork();
	if(cl==0){ close(l); int c=socket(AF_INET,SOCK_STREAM,0); double t0=now_s(); connect(c,(void*)&a,sizeof a);
		write(c,"request",7); char b[64]; ssize_t n=read(c,b,sizeof b); double dt=now_s()-t0;
		printf("client: reply %zd bytes, quick (<1 s): %s\n",n,dt<1?"yes":"no"); fprintf(stderr,"client took %.3f s\n",dt); fflush(stdout); _exit(0);}
	/* acceptor: hands the connection to the worker */
	int s=accept(l,0,0); sendfd(sp[0],s); close(s);
	waitpid(cl,0,0); waitpid(w,0,0); return 0;
}
