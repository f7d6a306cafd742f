/* SPDX-License-Identifier: MIT */
/*
 * Start-up: the configuration, the program's first steps, logging.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "link.h"
#include "listener.h"
#include "notify.h"
#include "ring.h"
#include "rundir.h"
#include "stats.h"
#include "txrx.h"
#include "interposer.h"
struct sc_interposer interp = { .claim_ms = 10000, .rdv_lock = PTHREAD_MUTEX_INITIALIZER,
			   .create_lock = PTHREAD_MUTEX_INITIALIZER };
SC_LOCK_RANK(interp.rdv_lock, LO_RDV)
SC_LOCK_RANK(interp.create_lock, LO_CREATE)

void log_line(int level, const char *fmt, ...)
{
	if (interp.log < level)
		return;
	KEEP_ERRNO();
	char buf[512];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "shortcut[%d]: ", (int)sc__pid());
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	sc__write_stderr(buf, (size_t)n);
}

/* ---- start-up ----------------------------------------------------------- */


__attribute__((constructor)) static void sc_preload_init(void)
{
	pthread_once(&real_once, real_init);
	(void)sc__pid();        /* cached now: a vfork child must find our pid there */
	interp.ok = sc__config_load() == 0;
	interp.log = (int)sc__cfg.log;
	interp.disabled = sc__cfg.disable;
	interp.claim_ms = sc__cfg.claim_ms;
	if (!interp.ok) {
		/* a wrong setting is reported and nothing is accelerated:
		 * the program still runs, on plain TCP */
		fprintf(stderr, "shortcut: configuration invalid; running without acceleration\n");
		interp.disabled = true;
	}
	if (!sc__rundir())
		interp.disabled = true;      /* said at the first TCP socket (stats_open) */
	pthread_atfork(atfork_prepare, NULL, atfork_child);
	if (!interp.disabled)
		go_start();     /* before any Go code runs */
	sc__switch_hook = sw_hook;
	sc__tick_hook = linger_tick;    /* a client's closes waiting for their FIN */
	sc__ident_hook = sc__self;     /* our HELLOs name us */
	LOG(2, "libshortcut %s loaded (%s)", SC_VERSION, interp.disabled ? "disabled" : "enabled");
}
