/* SPDX-License-Identifier: MIT */
/* posix_spawn of a program without the library (glibc execs inside it without
 * calling execve through the PLT), the parent keeping its copy; otherwise as
 * sem_fork_exec_child (exec_child_run, exec_common.h): the client exchanges
 * a message, sends 10000 bytes the server has not read, leaves the server's
 * 40000 unread, and posix_spawn()s python3 with LD_PRELOAD removed and the
 * fd number on its command line.  The parent keeps the fd open without
 * touching it until the child exits, then closes it.  Python reads the 40000
 * and the 3000 the server sends after it started, exact and in order, sends
 * 2000 and shuts down writing (a FIN, although the parent still holds the
 * socket); the server gets the client's 10000 then python's 2000, exact and
 * in order, then EOF.  The exec by a process that inherited the connection
 * switches it back to TCP, so two halves switch. */
// expect: switched 2
#include "exec_common.h"
#include <spawn.h>

/* the child: posix_spawn python3, LD_PRELOAD out of the environment given */
static pid_t spawn(char *argv[])
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fileno(t_out), 1);
	extern char **environ;
	int ne = 0;
	while (environ[ne])
		ne++;
	char **env = calloc((size_t)ne + 1, sizeof(char *));
	int k = 0;
	for (int i = 0; i < ne; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11))
			env[k++] = environ[i];
	pid_t pid;
	if (posix_spawn(&pid, "/usr/bin/python3", &fa, NULL, argv, env) != 0)
		fatal("posix_spawn");
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	return pid;
}

int main(void)
{
	return exec_child_run("posix_spawn python3 without the library", spawn);
}
