/* SPDX-License-Identifier: MIT */
/* fork + exec of a program without the library, the parent keeping its
 * copy: the client exchanges a message, sends 10000 bytes the server has not
 * read, leaves the server's 40000 unread, and forks a child that exec()s
 * python3 with LD_PRELOAD removed and the fd number on its command line.
 * The parent keeps the fd open without touching it until the child exits,
 * then closes it.  Python reads the 40000 and the 3000 the server sends
 * after it started, exact and in order, sends 2000 and shuts down writing
 * (a FIN, although the parent still holds the socket); the server gets the
 * client's 10000 then python's 2000, exact and in order, then EOF.  The
 * exec by a process that inherited the connection switches it back to TCP,
 * so two halves switch.  The conversation: exec_child_run (exec_common.h). */
// expect: switched 2
#include "exec_common.h"

/* the child: fork, then exec python3 without the library */
static pid_t fork_exec(char *argv[])
{
	pid_t pid = t_fork();
	if (pid == 0) {
		if (dup2(fileno(t_out), 1) < 0)
			fatal("dup2");
		unsetenv("LD_PRELOAD");
		execv("/usr/bin/python3", argv);
		fatal("exec python3");
	}
	return pid;
}

int main(void)
{
	return exec_child_run("fork a child that execs python3 without the library", fork_exec);
}
