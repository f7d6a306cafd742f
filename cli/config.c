/* SPDX-License-Identifier: MIT */
/*
 * `shortcut config`: validate the SHORTCUT_* environment as the library
 * does, then print every setting of src/core/settings.def with the value
 * in effect and whether it was set or is the default.
 */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "config.h"
#include "rundir.h"
#include "shortcut.h"

static void size_str(uint32_t v, char *buf, size_t len)
{
	if (v >= (1u << 20) && !(v & ((1u << 20) - 1)))
		snprintf(buf, len, "%uM", v >> 20);
	else if (v >= 1024 && !(v & 1023))
		snprintf(buf, len, "%uK", v >> 10);
	else
		snprintf(buf, len, "%u", v);
}

static void group_str(char *buf, size_t len)
{
	if (!sc__cfg.group_set) {
		snprintf(buf, len, "(unset: this user only)");
		return;
	}
	struct group *g = getgrgid((gid_t)sc__cfg.group_gid);
	if (g)
		snprintf(buf, len, "%s (gid %u)", g->gr_name, (unsigned)sc__cfg.group_gid);
	else
		snprintf(buf, len, "%u", (unsigned)sc__cfg.group_gid);
}

#define SC_SHOW_RING(f, buf) size_str(sc__cfg.f, buf, sizeof(buf))
#define SC_SHOW_MICROS(f, buf) snprintf(buf, sizeof(buf), "%u", sc__cfg.f / 1000)
#define SC_SHOW_UINT(f, buf) snprintf(buf, sizeof(buf), "%u", sc__cfg.f)
#define SC_SHOW_PATH(f, buf) \
	do { if (sc__rundir_choose(buf, sizeof(buf)) < 0) snprintf(buf, sizeof(buf), "?"); } while (0)
#define SC_SHOW_GROUP(f, buf) group_str(buf, sizeof(buf))

int sc__config_main(void)
{
	if (sc_config_check())
		return 2;
	char v[256];
#define SC_SETTING(name, field, kind, ...) \
	SC_SHOW_##kind(field, v); \
	printf("%-20s %-24s %s\n", #name, v, getenv(#name) ? "set" : "default");
#include "settings.def"
	printf("configuration valid (README \"Configuration\" and shortcut(7) say what each does)\n");
	return 0;
}

const char *sc__cli_rundir(int *status)
{
	*status = 2;
	if (sc_config_check())
		return NULL;
	const char *dir = sc__rundir();
	if (!dir) {
		fprintf(stderr, "shortcut: run directory unusable: %s\n", sc__rundir_error());
		*status = 1;
	}
	return dir;
}
