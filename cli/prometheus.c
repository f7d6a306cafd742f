/* SPDX-License-Identifier: MIT */
/*
 * shortcut stats --prometheus: the run directory's counters in the
 * Prometheus text exposition format (version 0.0.4), for node_exporter's
 * textfile collector:
 *
 *   shortcut stats --prometheus > DIR/shortcut.prom.$$ && mv DIR/shortcut.prom.$$ DIR/shortcut.prom
 *
 * Every family has its HELP and TYPE; counters end in _total.  The
 * counters are sums over the processes of the run directory, the running
 * ones and those that exited (their counters were kept), so they only grow,
 * except after `shortcut stats --reset` (a counter reset, as Prometheus
 * understands one).
 */
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "stats.h"

/* the sums are plain numbers (run.c adds them up in a uint64_t array) */
#define V(f) ((unsigned long long)*(const uint64_t *)&s->f)

static void family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: backslash, double quote and newline escaped. */
static void label_value(const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			printf("\\%c", *v);
		else if (*v == '\n')
			printf("\\n");
		else
			putchar(*v);
	}
}

int sc__stats_prometheus(const char *dir, unsigned long long procs, unsigned long long live,
			 const struct sc_counters *s)
{
	family("shortcut_info", "gauge", "The shortcut that wrote these metrics, and the run "
	       "directory they are from.");
	printf("shortcut_info{version=\"%s\",rundir=\"", SC_VERSION);
	label_value(dir);
	printf("\"} 1\n");
	family("shortcut_processes", "gauge", "Processes whose counters are summed here "
	       "(running and exited).");
	printf("shortcut_processes %llu\n", procs);
	family("shortcut_processes_running", "gauge", "Of those, the processes still running.");
	printf("shortcut_processes_running %llu\n", live);

	family("shortcut_connections_total", "counter", "TCP connections of accelerated "
	       "processes, by where they went: shm (shared memory) or tcp (stayed on kernel "
	       "TCP, see shortcut_fallbacks_total).");
	printf("shortcut_connections_total{mode=\"shm\"} %llu\n", V(conns_accelerated));
	printf("shortcut_connections_total{mode=\"tcp\"} %llu\n", V(conns_fallback));
	family("shortcut_fallbacks_total", "counter", "TCP connections that stayed on kernel "
	       "TCP, by reason (shortcut(7), FALLBACK REASONS).");
	for (int i = 0; i < SC_FB_MAX; i++)
		if (sc__fallback_names[i] && i != SC_FB_SWITCHED)
			printf("shortcut_fallbacks_total{reason=\"%s\"} %llu\n", sc__fallback_names[i],
			       V(fallback[i]));
	family("shortcut_switches_total", "counter", "Connection halves switched from shared "
	       "memory back to TCP while open (exec, SCM_RIGHTS, io_uring, urgent data, "
	       "shortcut off).");
	printf("shortcut_switches_total %llu\n", V(fallback[SC_FB_SWITCHED]));
	family("shortcut_bytes_total", "counter", "Payload bytes of accelerated processes' "
	       "connections, by path (shm: shared memory, tcp: connections on kernel TCP) and "
	       "direction.");
	printf("shortcut_bytes_total{path=\"shm\",direction=\"sent\"} %llu\n", V(bytes_sent));
	printf("shortcut_bytes_total{path=\"shm\",direction=\"received\"} %llu\n", V(bytes_received));
	printf("shortcut_bytes_total{path=\"tcp\",direction=\"sent\"} %llu\n", V(bytes_tcp_sent));
	printf("shortcut_bytes_total{path=\"tcp\",direction=\"received\"} %llu\n",
	       V(bytes_tcp_received));

	family("shortcut_shm_connections_total", "counter", "Shared-memory connections, both "
	       "sides counted, by event: opened, closed, aborted (reset, or the peer died), "
	       "refused.");
	printf("shortcut_shm_connections_total{event=\"opened\"} %llu\n", V(conns_opened));
	printf("shortcut_shm_connections_total{event=\"closed\"} %llu\n", V(conns_closed));
	printf("shortcut_shm_connections_total{event=\"aborted\"} %llu\n", V(conns_aborted));
	printf("shortcut_shm_connections_total{event=\"refused\"} %llu\n", V(conns_refused));
	family("shortcut_protocol_errors_total", "counter", "Protocol violations by a peer "
	       "(its connection ended with EPROTO).");
	printf("shortcut_protocol_errors_total %llu\n", V(proto_errors));
	family("shortcut_link_groups_total", "counter", "Link groups (one shared segment per "
	       "pair of processes), by how this side got them: created or joined.");
	printf("shortcut_link_groups_total{how=\"created\"} %llu\n", V(groups_created));
	printf("shortcut_link_groups_total{how=\"joined\"} %llu\n", V(groups_joined));
	family("shortcut_wakeups_total", "counter", "Wake-up system calls made for a peer "
	       "that was asleep.");
	printf("shortcut_wakeups_total %llu\n", V(wakeups_sent));
	family("shortcut_sleeps_total", "counter", "Waits that slept in the kernel.");
	printf("shortcut_sleeps_total %llu\n", V(sleeps));
	family("shortcut_spin_hits_total", "counter", "Waits that ended while still spinning "
	       "(SHORTCUT_SPIN_US), without a system call.");
	printf("shortcut_spin_hits_total %llu\n", V(spin_hits));
	family("shortcut_spins_crowded_total", "counter", "Waits that slept without spinning: "
	       "the machine had more runnable threads than CPUs.");
	printf("shortcut_spins_crowded_total %llu\n", V(spins_crowded));

	family("shortcut_devmem_bindings", "gauge", "Device-memory regions bound now (bind-rx, "
	       "bind-tx, sc_devmem_bind_*), by running processes.");
	printf("shortcut_devmem_bindings %llu\n", V(dm_bindings));
	family("shortcut_devmem_bytes_total", "counter", "Payload bytes written into bound "
	       "device-memory regions.");
	printf("shortcut_devmem_bytes_total %llu\n", V(dm_bytes_in));
	family("shortcut_devmem_fragments_total", "counter", "Device-memory fragments "
	       "delivered to receivers.");
	printf("shortcut_devmem_fragments_total %llu\n", V(dm_frags));
	family("shortcut_devmem_fragments_outstanding", "gauge", "Fragments a receiver holds "
	       "and has not returned (SO_DEVMEM_DONTNEED).");
	printf("shortcut_devmem_fragments_outstanding %llu\n", V(dm_frags_out));
	family("shortcut_devmem_waits_total", "counter", "Times a sender waited for a free "
	       "chunk in a region full of held fragments.");
	printf("shortcut_devmem_waits_total %llu\n", V(dm_waits));
	return ferror(stdout) ? 1 : 0;
}
