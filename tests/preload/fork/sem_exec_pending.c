/* SPDX-License-Identifier: MIT */
/* A client that connects, writes, and execs a program before the server accepts: its buffered bytes reach the server (the offer is withdrawn, the bytes go on TCP).
 * The server accepts once the client has exec'd (EOF on a close-on-exec pipe), not after a fixed time. */
// expect: tcp
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv){
	if(argc>1){ /* the exec'd image: waits for the server's answer on fd argv[1] */
		int fd=atoi(argv[1]); char b[64]; struct pollfd p={fd,POLLIN,0}; int r=poll(&p,1,4000);
		ssize_t n = r>0 ? read(fd,b,sizeof b) : -1; printf("exec'd client: answer %zd\n",n); return 0; }
	int l=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={.sin_family=AF_INET}; a.sin_addr.s_addr=htonl(INADDR_LOOPBACK);
	socklen_t al=sizeof a; bind(l,(void*)&a,sizeof a); listen(l,16); getsockname(l,(void*)&a,&al);
	int ex[2]; if(pipe2(ex,O_CLOEXEC)<0) return 1;   /* EOF at the client's exec */
	pid_t cl=fork();
	if(cl==0){ close(l); close(ex[0]); int c=socket(AF_INET,SOCK_STREAM,0); connect(c,(void*)&a,sizeof a);
		write(c,"hello",5);          /* then hand the conversation to another program */
		char fds[16]; snprintf(fds,sizeof fds,"%d",c); execl("/proc/self/exe","pendexec",fds,(char*)NULL); _exit(127);}
	close(ex[1]);                        /* a busy server accepts a bit later: after the exec */
	{ char x; while(read(ex[0],&x,1)>0){} close(ex[0]); }
	int s=accept(l,0,0); char b[64]; struct pollfd p={s,POLLIN,0};
	ssize_t n = poll(&p,1,3000)>0 ? read(s,b,sizeof b) : -1;
	printf("server: request %zd bytes\n",n); fflush(stdout);
	if(n>0) write(s,"answer",6);
	waitpid(cl,0,0); return 0;
}
