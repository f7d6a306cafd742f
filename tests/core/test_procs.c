/* SPDX-License-Identifier: MIT */
/*
 * Process identities of the run directory (src/rundir/procs.c): what every
 * judgement of another process rests on, the same in every PID namespace.
 *
 *  1. our identity: made once, never 0, 56 bits, alive; its slot names our
 *     pid and command.
 *  2. a child's own identity (after sc__proc_atfork_child): another one;
 *     alive while the child runs, dead once it is killed even before it is
 *     reaped (a zombie's files are closed); the parent's identity is not
 *     kept alive by the description the child inherited.
 *  3. a process killed just after it forked, its child not run yet (it
 *     never calls into the library: it only waits): dead while the child
 *     lives.  (With OFD locks, the child's inherited description kept the
 *     parent alive until the child first ran: sem_fork_owner_killed_close
 *     failed 8 times in 20 under load.)
 *  4. a process in a PID namespace of its own (pid 1 there, as a
 *     container's first process): alive, its slot says pid 1 and another
 *     namespace, dead once it exits -- while our own pid 1 still runs.
 *     Skipped where no PID namespace can be made (not root).
 *  5. nonsense identities (0, more than 56 bits, a free slot, a stale
 *     generation) are dead.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rundir.h"
#include "t_util.h"

static char rundir[64] = "/tmp/sc-test-procs-XXXXXX";
static int up[2], down[2];
/* killed_forker's grandchild's own: a byte it has not read yet must not
 * be taken by a later scenario's child from down (pid_namespace's pid 1
 * once went at once, before the parent had looked at it) */
static int gdown[2];

/* until id is seen dead (killed: its descriptions close as it exits; a
 * hang guard, not a deadline) */
static void wait_dead(uint64_t id, const char *what)
{
	uint64_t t0 = t_now_ms();
	while (sc__proc_alive(id)) {
		T_ASSERTF(t_now_ms() - t0 < 10000, "%s alive 10 s after SIGKILL", what);
		t_sleep_ms(1);
	}
}

static void report(uint64_t id)
{
	t_write_full(up[1], &id, sizeof(id));
	char c;
	t_read_full(down[0], &c, 1);    /* until killed */
}

static int own_child(void *arg)
{
	(void)arg;
	sc__proc_atfork_child();        /* (the interposer's fork handler does it) */
	prctl(PR_SET_NAME, "sc-kid", 0, 0, 0);
	report(sc__self());
	return 1;
}

/* a child that does nothing of ours: it waits for its parent's end */
static int idle_child(void *arg)
{
	char c;
	(void)arg;
	t_read_full(gdown[0], &c, 1);
	return 0;
}

/* takes an identity, reports it, forks idle_child, reports its pid, waits */
static int forker(void *arg)
{
	(void)arg;
	sc__proc_atfork_child();
	uint64_t id = sc__self();
	t_write_full(up[1], &id, sizeof(id));
	pid_t k = fork();
	if (k == 0)
		_exit(idle_child(NULL));
	uint64_t kp = (uint64_t)k;
	t_write_full(up[1], &kp, sizeof(kp));
	char c;
	t_read_full(down[0], &c, 1);    /* until killed */
	return 1;
}

/* forks into a new PID namespace: the grandchild is its pid 1 */
static int ns_parent(void *arg)
{
	(void)arg;
	if (unshare(CLONE_NEWPID) < 0) {
		uint64_t none = 0;
		t_write_full(up[1], &none, sizeof(none));
		return 0;
	}
	pid_t g = fork();
	if (g == 0) {
		sc__proc_atfork_child();
		T_EQ(getpid(), 1);
		report(sc__self());
		_exit(1);
	}
	int st;
	waitpid(g, &st, 0);
	return 0;
}

static uint64_t read_id(void)
{
	uint64_t id;
	t_read_full(up[0], &id, sizeof(id));
	return id;
}

static pid_t main_pid;

/* (at exit of this process, not of a child leaving through exit()) */
static void cleanup(void)
{
	char cmd[128];
	if (getpid() != main_pid)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", rundir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", rundir);
}

/* every scenario: a run directory of our own (removed when the program
 * passes), the pipes to the children */
static void setup(void)
{
	if (!mkdtemp(rundir))
		T_FAIL("mkdtemp: %s", strerror(errno));
	setenv("SHORTCUT_RUNDIR", rundir, 1);
	main_pid = getpid();
	atexit(cleanup);
	T_ASSERT(pipe(up) == 0 && pipe(down) == 0 && pipe(gdown) == 0);
}

/* 1 */
T_TEST(self)
{
	uint64_t me = sc__self();
	T_ASSERT(me != 0 && !(me & ~SC_PROC_ID_MASK));
	T_EQ(sc__self(), me);
	T_EQ(sc__self_peek(), me);
	T_ASSERT(sc__proc_alive(me));
	struct sc_proc info;
	T_EQ(sc__proc_info(me, &info), 0);
	T_EQ(info.pid, getpid());
	T_EQ(info.uid, (uint32_t)geteuid());
	struct stat st;
	T_ASSERT(stat("/proc/self/ns/pid", &st) == 0);
	T_EQ(info.pidns, (uint64_t)st.st_ino);
}

/* 2: the killed child's identity, which 5 uses too */
static uint64_t dead_kid_id;

static uint64_t killed_child(void)
{
	uint64_t me = sc__self();
	struct sc_proc info;
	pid_t kid = t_fork(own_child, NULL);
	uint64_t kid_id = read_id();
	T_ASSERT(kid_id && kid_id != me);
	T_ASSERT(sc__proc_alive(kid_id));
	T_EQ(sc__proc_info(kid_id, &info), 0);
	T_EQ(info.pid, kid);
	T_ASSERT(!strcmp(info.comm, "sc-kid"));
	T_ASSERT(kill(kid, SIGKILL) == 0);
	wait_dead(kid_id, "a killed child");
	T_EQ(t_state_of(kid, kid), 'Z');        /* dead before it is reaped */
	t_wait_status(kid);
	T_ASSERT(sc__proc_alive(me));
	return kid_id;
}

T_TEST(killed_child)
{
	dead_kid_id = killed_child();
}

/* 3 */
T_TEST(killed_forker)
{
	sc__self();                     /* ours made before the fork */
	pid_t kid = t_fork(forker, NULL);
	uint64_t fid = read_id();
	pid_t grandkid = (pid_t)read_id();
	T_ASSERT(sc__proc_alive(fid));
	T_ASSERT(kill(kid, SIGKILL) == 0);
	t_wait_status(kid);             /* reaped: its files are closed */
	T_ASSERT(kill(grandkid, 0) == 0);       /* its child lives on */
	T_ASSERT(!sc__proc_alive(fid));
	char go = 'g';
	t_write_full(gdown[1], &go, 1); /* the grandchild goes */
}

/* 4 */
T_TEST(pid_namespace)
{
	struct sc_proc info;
	struct stat st;
	T_ASSERT(stat("/proc/self/ns/pid", &st) == 0);
	sc__self();                     /* ours made before the fork */
	pid_t kid = t_fork(ns_parent, NULL);
	uint64_t ns_id = read_id();
	if (ns_id) {
		T_ASSERT(sc__proc_alive(ns_id));
		T_EQ(sc__proc_info(ns_id, &info), 0);
		T_EQ(info.pid, 1);
		T_ASSERT(info.pidns != (uint64_t)st.st_ino);
		char c = 'x';
		t_write_full(down[1], &c, 1);   /* it goes */
		wait_dead(ns_id, "pid 1 of another namespace");
		T_ASSERT(kill(1, 0) == 0);      /* while ours runs */
	} else {
		t_log("no PID namespace (not root?): part 4 skipped");
	}
	t_wait_status(kid);
}

/* 5 (run alone: 2 first, for a dead child's identity) */
T_TEST(nonsense)
{
	uint64_t me = sc__self();
	struct sc_proc info;
	if (!dead_kid_id)
		dead_kid_id = killed_child();
	T_ASSERT(!sc__proc_alive(0));
	T_ASSERT(!sc__proc_alive(me | 1ull << 60));
	T_ASSERT(!sc__proc_alive(me ^ 1ull << 40));     /* our slot, another generation */
	T_ASSERT(!sc__proc_alive(dead_kid_id));
	T_ASSERT(sc__proc_info(dead_kid_id ^ 1ull << 40, &info) < 0);
}

T_MAIN(setup,
       T_ENTRY(self),
       T_ENTRY(killed_child),
       T_ENTRY(killed_forker),
       T_ENTRY(pid_namespace),
       T_ENTRY(nonsense))
