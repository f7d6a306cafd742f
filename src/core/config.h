/* SPDX-License-Identifier: MIT */
#ifndef SC_CONFIG_H
#define SC_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

/* Validated SHORTCUT_* settings (settings.def); read once, on first use.
 * rmem, wmem: ring bytes (a power of two); spin_ns: 0 = never spin;
 * short_tcp: 0 never, 1 where shared memory loses, 2 always; group_set,
 * group_gid: SHORTCUT_GROUP (users who trust each other share the run
 * directory and accelerate each other's connections). */
#define SC_FIELD_RING(f) uint32_t f;
#define SC_FIELD_MICROS(f) uint32_t f;
#define SC_FIELD_UINT(f) uint32_t f;
#define SC_FIELD_PATH(f)
#define SC_FIELD_GROUP(f) uint32_t f##_set, f##_gid;
struct sc_config {
#define SC_SETTING(name, field, kind, ...) SC_FIELD_##kind(field)
#include "settings.def"
};

extern struct sc_config sc__cfg;

/* 0, or -EINVAL after printing which variable is wrong and what it allows. */
int sc__config_load(void);
/* May the process whose credentials a Unix socket's peer has (sock, its
 * SO_PEERCRED in cr) share memory with us: our user, or with
 * SHORTCUT_GROUP a member of that group (its primary or supplementary
 * groups, SO_PEERGROUPS)? */
struct ucred;
bool sc__peer_trusted(int sock, const struct ucred *cr);

#endif
