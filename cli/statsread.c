/* SPDX-License-Identifier: MIT */
/*
 * The run directory's stats files as the tool reads them: one process's
 * connection records listed (`shortcut stat`, --json), its counters and
 * the retired ones summed and printed (`shortcut stats`, --json;
 * --prometheus in prometheus.c).  Any process of the user can write these
 * files, and one may have died mid-write: everything read from them is
 * bounded here, and fuzz_stats feeds them anything.
 */
#include <arpa/inet.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "rundir.h"
#include "stats.h"

void sc__json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			printf("\\u%04x", ch);        /* (a byte: valid JSON whatever it is) */
		else
			putchar(ch);
	}
	putchar('"');
}

bool sc__stats_file_live(const struct sc_stats_file *f)
{
	/* by the process's identity, the same in every PID namespace (an
	 * older version's file has only its pid) */
	return f->version == SC_STATS_VERSION ? sc__proc_alive(f->ident) : sc__pid_alive(f->pid);
}

static const char *addr_str(const struct sc_addr16 *a, uint16_t port, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];
	static const uint8_t pre[12] = { [10] = 0xff, [11] = 0xff };
	if (!port) {            /* not known (a client's own, on TCP) */
		snprintf(buf, len, "-");
	} else if (!memcmp(a->b, pre, 12)) {
		inet_ntop(AF_INET, &a->b[12], ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, port);
	} else {
		inet_ntop(AF_INET6, a->b, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, port);
	}
	return buf;
}

void sc__stat_list(const struct sc_stats_file *f, bool json, int *n)
{
	static const char *const modes[] = { "-", "tcp", "pending", "shm" };
	for (uint32_t i = 0, nr = sc__stats_nrecs(f); i < nr; i++) {
		const struct sc_conn_rec *r = &f->recs[i];
		uint32_t m = atomic_load_explicit(&r->mode, memory_order_acquire);
		if (m == SC_REC_FREE || m > SC_REC_SHM)
			continue;
		char la[64], pa[64], why[40];
		addr_str(&r->laddr, r->lport, la, sizeof(la));
		addr_str(&r->paddr, r->pport, pa, sizeof(pa));
		bool pfor = false, ffor = false;
		int32_t ppid = m == SC_REC_SHM ? sc__pid_view(r->peer_ident, r->peer_pid, &pfor) : 0;
		int32_t fpid = sc__pid_view(f->ident, f->pid, &ffor);
		if (m == SC_REC_SHM)
			snprintf(why, sizeof(why), pfor ? "[%d]" : "%d", (int)ppid);
		else if (r->reason && r->reason <= SC_FB_MAX && sc__fallback_names[r->reason - 1])
			snprintf(why, sizeof(why), "%s", sc__fallback_names[r->reason - 1]);
		else
			snprintf(why, sizeof(why), "-");
		unsigned long long tx = atomic_load_explicit(&r->bytes_sent, memory_order_relaxed);
		unsigned long long rx = atomic_load_explicit(&r->bytes_received, memory_order_relaxed);
		/* the name is the process's to choose (prctl): a copy,
		 * terminated, printed escaped */
		char comm[sizeof(f->comm)];
		memcpy(comm, f->comm, sizeof(comm));
		comm[sizeof(comm) - 1] = 0;
		if (json) {
			/* a pid of a PID namespace the viewer cannot see is
			 * that namespace's: "foreign" says so */
			printf("%s{\"pid\": %d, \"pid_foreign\": %s, \"command\": ", *n ? ", " : "",
			       (int)fpid, ffor ? "true" : "false");
			sc__json_str(comm);
			printf(", \"fd\": %d, \"mode\": \"%s\", "
			       "\"local\": \"%s\", \"peer\": \"%s\", \"peer_pid\": %d, "
			       "\"peer_pid_foreign\": %s, "
			       "\"fallback\": \"%s\", \"bytes_sent\": %llu, \"bytes_received\": %llu}",
			       r->fd, modes[m], la, pa, (int)ppid, pfor ? "true" : "false",
			       m == SC_REC_TCP ? why : "", tx, rx);
		} else {
			for (char *p = comm; *p; p++)
				if ((unsigned char)*p < 0x20 || *p == 0x7f)
					*p = '?';
			char pidbuf[16];
			snprintf(pidbuf, sizeof(pidbuf), ffor ? "[%d]" : "%d", (int)fpid);
			printf("%-8s %-15.15s %5d %-8s %-24s %-24s %-22s %12llu %12llu\n", pidbuf,
			       comm, r->fd, modes[m], la, pa, why, tx, rx);
		}
		++*n;
	}
}

int sc__stat_shm_conns(const struct sc_stats_file *f)
{
	int k = 0;
	for (uint32_t i = 0, n = sc__stats_nrecs(f); i < n; i++)
		if (atomic_load_explicit(&f->recs[i].mode, memory_order_acquire) == SC_REC_SHM)
			k++;
	return k;
}

void sc__stats_add_file(struct sc_stats_sum *s, const struct sc_stats_file *f, bool live)
{
	const _Atomic uint64_t *c = (const _Atomic uint64_t *)&f->c;
	s->procs++;
	s->live += live;
	for (size_t i = 0; i < sizeof(s->c) / 8; i++)
		s->c[i] += atomic_load_explicit(&c[i], memory_order_relaxed);
	/* shared-memory connections still open (or never closed: the
	 * process exited without close()) count from their records, and so
	 * do those on TCP since their set-up (sc__rec_tcp_only); closed
	 * ones were folded into the counters */
	for (uint32_t i = 0, n = sc__stats_nrecs(f); i < n && f->version == SC_STATS_VERSION; i++) {
		const struct sc_conn_rec *r = &f->recs[i];
		size_t tx, rx;
		if (!sc__rec_counters(r, &tx, &rx))
			continue;
		s->c[tx] += atomic_load_explicit(&r->bytes_sent, memory_order_relaxed);
		s->c[rx] += atomic_load_explicit(&r->bytes_received, memory_order_relaxed);
	}
}

void sc__stats_add_retired(struct sc_stats_sum *s, const struct sc_stats_retired *r)
{
	const _Atomic uint64_t *c = (const _Atomic uint64_t *)&r->c;
	for (size_t i = 0; i < sizeof(s->c) / 8; i++)
		s->c[i] += atomic_load_explicit(&c[i], memory_order_relaxed);
	s->procs += r->processes;
}

/* `shortcut stats --json`: every counter of counters.def by its key, the
 * fallback reasons in an object, the grouped ones in theirs. */
static int stats_json(const char *dir, const struct sc_stats_sum *sum,
		      const struct sc_counters *s)
{
	printf("{\"rundir\": ");
	sc__json_str(dir);
	printf(", \"processes\": %llu, \"live_processes\": %llu", sum->procs, sum->live);
	for (size_t i = 0; i < sc__ncounter_descs; i++) {
		const struct sc_counter_desc *d = &sc__counter_descs[i];
		if (!d->group)
			printf(", \"%s\": %llu", d->json, sc__counter_value(s, d));
	}
	printf(", \"conns_switched_to_tcp\": %llu, \"fallback\": {",
	       (unsigned long long)*(const uint64_t *)&s->fallback[SC_FB_SWITCHED]);
	for (int i = 0, first = 1; i < SC_FB_MAX; i++) {
		if (!sc__fallback_names[i] || i == SC_FB_SWITCHED)
			continue;
		printf("%s\"%s\": %llu", first ? "" : ", ", sc__fallback_names[i],
		       (unsigned long long)*(const uint64_t *)&s->fallback[i]);
		first = 0;
	}
	printf("}");
	for (size_t i = 0; i < sc__ncounter_descs; i++) {
		const struct sc_counter_desc *g = &sc__counter_descs[i];
		if (!g->group || !sc__counter_first(g, false))
			continue;
		printf(", \"%s\": {", g->group);
		for (size_t j = i, first = 1; j < sc__ncounter_descs; j++) {
			const struct sc_counter_desc *d = &sc__counter_descs[j];
			if (!d->group || strcmp(d->group, g->group))
				continue;
			printf("%s\"%s\": %llu", first ? "" : ", ", d->json, sc__counter_value(s, d));
			first = 0;
		}
		printf("}");
	}
	printf("}\n");
	return 0;
}

int sc__stats_print(const char *dir, const struct sc_stats_sum *sum, bool json, bool prom)
{
	const struct sc_counters *s = (const struct sc_counters *)sum->c;
#define V(f) ((unsigned long long)*(const uint64_t *)&s->f)
	if (prom)
		return sc__stats_prometheus(dir, sum->procs, sum->live, s);
	if (json)
		return stats_json(dir, sum, s);
	printf("run directory       %s\n", dir);
	printf("processes           %llu (%llu running)\n", sum->procs, sum->live);
	printf("connections         %llu on shared memory, %llu on TCP\n",
	       V(conns_accelerated), V(conns_fallback));
	for (int i = 0; i < SC_FB_MAX; i++)
		if (sc__fallback_names[i] && V(fallback[i]) && i != SC_FB_SWITCHED)
			printf("  stayed on TCP     %-22s %llu\n", sc__fallback_names[i], V(fallback[i]));
	if (V(fallback[SC_FB_SWITCHED]))
		printf("  later switched back to TCP (exec, SCM_RIGHTS, io_uring, off) %llu\n",
		       V(fallback[SC_FB_SWITCHED]));
	printf("bytes, shared memory  sent %llu, received %llu\n",
	       V(bytes_sent), V(bytes_received));
	printf("bytes, TCP            sent %llu, received %llu\n",
	       V(bytes_tcp_sent), V(bytes_tcp_received));
	if (V(closes_passive) || V(closes_active))
		printf("client closes       %llu passive (the server's FIN first: TIME_WAIT the "
		       "server's), %llu first\n", V(closes_passive), V(closes_active));
	if (V(opens_quiet))
		printf("quiet OPENs         %llu (a spinning client's connection named in its "
		       "offer: no message, no wake-up)\n", V(opens_quiet));
	if (V(dm_bindings) || V(dm_frags) || V(dm_bytes_in))
		printf("device memory       %llu bindings, %llu bytes into regions, %llu fragments "
		       "(%llu outstanding), %llu waits for a free chunk\n", V(dm_bindings),
		       V(dm_bytes_in), V(dm_frags), V(dm_frags_out), V(dm_waits));
	printf("aborted %llu, refused %llu, protocol errors %llu, link groups %llu+%llu, "
	       "wake-ups %llu, sleeps %llu (%llu without spinning: machine crowded)\n",
	       V(conns_aborted), V(conns_refused), V(proto_errors), V(groups_created),
	       V(groups_joined), V(wakeups_sent), V(sleeps), V(spins_crowded));
#undef V
	return 0;
}
