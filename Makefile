# shortcut — build, test, bench, install.  `make` builds into build/.
CC      ?= cc
CFLAGS  ?= -O2 -g
# CPPFLAGS and LDFLAGS too, as a distribution's build passes them
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
# the version, from one place: VERSION (the soname's number is its first)
VERSION := $(shell cat VERSION)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME  := libshortcut.so.$(SOMAJOR)
BASE    := -std=gnu11 -D_GNU_SOURCE -Iinclude -pthread -fno-strict-aliasing \
	   -DSC_VERSION='"$(VERSION)"' $(CPPFLAGS)
B       := build

# where `make install` puts things (DESTDIR: a staging root in front of all)
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
PKGCONFIGDIR   ?= $(LIBDIR)/pkgconfig
COMPLETIONSDIR ?= $(PREFIX)/share/bash-completion/completions
# `shortcut run` finds the library relative to its own path: this way
# from BINDIR to LIBDIR (a prefix moved as a whole still works)
LIBDIR_REL := $(shell realpath -m --relative-to='$(BINDIR)' '$(LIBDIR)')

# Three layers, one folder each, pointing one way (make check-layers):
#   src/core        the shared-memory connection core (libshortcut.a too)
#   src/rundir      the run directory: offer boards, stats files
#   src/interposer  the LD_PRELOAD interposer: in the shared library only
#                   (linked into a test program it would replace that
#                   program's own read/write/close)
CORE_SRC   := $(sort $(wildcard src/core/*.c))
RUNDIR_SRC := $(sort $(wildcard src/rundir/*.c))
PRELOAD    := $(sort $(wildcard src/interposer/*.c))
LIB_SRC    := $(CORE_SRC) $(RUNDIR_SRC)
HDRS       := $(wildcard src/*/*.h src/*/*.def) include/shortcut.h
# each layer sees its own headers and those below it
INC_core       := -Isrc/core
INC_rundir     := -Isrc/core -Isrc/rundir
INC_interposer := -Isrc/core -Isrc/rundir -Isrc/interposer
CLI_SRC := $(sort $(wildcard cli/*.c))

.PHONY: all test test-unit test-asan test-tsan test-preload test-preload-asan demo bench clean \
	check-layers check-shape check-build install uninstall deb FORCE
MANPAGES := $(B)/man/shortcut.1 $(B)/man/shortcut.7 $(B)/man/libshortcut.3
all: $(B)/libshortcut.so $(B)/$(SONAME) $(B)/libshortcut.a $(B)/shortcut $(B)/shortcut.pc \
	$(MANPAGES)

# --- normal build ------------------------------------------------------
$(B)/obj/%.o: src/%.c $(HDRS) VERSION | $(B)/obj
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(INC_$(patsubst %/,%,$(dir $*))) $(WARN) $(CFLAGS) -DSC_SYS_DIRECT -fPIC \
		-fvisibility=hidden -c $< -o $@
$(B)/obj $(B)/t $(B)/asan $(B)/tsan:
	mkdir -p $@
LIB_OBJ := $(patsubst src/%.c,$(B)/obj/%.o,$(LIB_SRC))
PRELOAD_OBJ := $(patsubst src/%.c,$(B)/obj/%.o,$(PRELOAD))
# The exports.  The public API gets a version node (sc_listen@@SHORTCUT_0);
# the libc names the interposer defines (calls.h: exported by their
# default visibility) stay in the base version, and must: glibc's loader
# binds a program's recv@GLIBC_2.2.5 to a base-version definition, never
# to one in a node of another name (tests/integration/test_install.py).
# So the script has no `local: *`: -fvisibility=hidden keeps the rest in,
# and check-layers checks the exports against calls.h.
$(B)/libshortcut.map: VERSION | $(B)/obj
	{ printf '/* made by make from VERSION: the API version node; the calls of\n'; \
	  printf ' * src/interposer/calls.h stay in the base version (Makefile) */\n'; \
	  printf 'SHORTCUT_$(SOMAJOR) {\n\tglobal:\n\t\tsc_*;\n};\n'; } > $@.tmp && mv $@.tmp $@
# the calls of calls.h, one a line (check-layers)
$(B)/calls.list: src/interposer/calls.h | $(B)/obj
	printf '#include "calls.h"\n#define X(f, file) f\n#define XT(f, file, t) f\nSC_CALLS(X, XT)\n' | \
		$(CC) -E -P -Isrc/interposer - | tr ' ' '\n' | grep . > $@.tmp && mv $@.tmp $@
# the docs table of the same list (committed; test_library.py checks it)
docs/calls.md: src/interposer/calls.h
	{ printf '# The calls the interposer defines\n\nGenerated from `src/interposer/calls.h` '; \
	  printf '(`make docs/calls.md`): every libc function\n`libshortcut.so` defines, '; \
	  printf 'and the file of `src/interposer/` that handles it.\n\n| call | file |\n|---|---|\n'; \
	  printf '#include "calls.h"\n#define X(f, file) | `f` | `file.c` |@\n#define XT(f, file, t) X(f, file)\nSC_CALLS(X, XT)\n' | \
		$(CC) -E -P -Isrc/interposer - | tr '@' '\n' | sed 's/^ *//' | grep '^|'; } > $@.tmp && mv $@.tmp $@
# one library: preloaded by `shortcut run`, linked by C API programs
# (installed as libshortcut.so.VERSION, with SONAME and libshortcut.so
# links; here libshortcut.so is the file and SONAME the link)
$(B)/libshortcut.so: $(LIB_OBJ) $(PRELOAD_OBJ) $(B)/libshortcut.map
	$(CC) -shared -pthread -Wl,-z,defs -Wl,-z,now -Wl,-soname,$(SONAME) \
		-Wl,--version-script=$(B)/libshortcut.map $(LDFLAGS) -o $@ $(filter %.o,$^) -ldl
$(B)/$(SONAME): | $(B)/libshortcut.so
	ln -sf libshortcut.so $@
$(B)/libshortcut.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^
# what the installed paths and the version change (rewritten only then)
$(B)/install.vars: FORCE | $(B)/obj
	@v='$(VERSION) $(PREFIX) $(LIBDIR) $(INCLUDEDIR) $(LIBDIR_REL)'; \
	 [ "$$(cat $@ 2>/dev/null)" = "$$v" ] || echo "$$v" > $@
$(B)/shortcut: $(CLI_SRC) $(wildcard cli/*.h) $(B)/libshortcut.a $(B)/install.vars
	$(CC) $(BASE) $(INC_rundir) $(WARN) $(CFLAGS) -DSC_LIBDIR_REL='"$(LIBDIR_REL)"' \
		-DSC_SONAME='"$(SONAME)"' -Icli $(LDFLAGS) -o $@ $(CLI_SRC) $(B)/libshortcut.a -lm
# pkg-config (relative to ${prefix} where the paths are under it)
$(B)/shortcut.pc: dist/shortcut.pc.in $(B)/install.vars
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' $< > $@
# man pages: the version and the date of CHANGELOG.md's newest entry
RELDATE := $(shell sed -n 's/^\#\# [^ ]* — \([0-9-]*\).*/\1/p' CHANGELOG.md | head -1)
$(B)/man/%: man/% VERSION CHANGELOG.md
	@mkdir -p $(dir $@)
	sed -e 's/@VERSION@/$(VERSION)/g' -e 's/@DATE@/$(RELDATE)/g' $< > $@

# The layers point one way: the core calls no function of the run
# directory's or the interposer's, the run directory none of the
# interposer's, and neither makes its own system calls through a libc name
# the interposer defines (inside a preloaded process that would call back
# into the interposer: the syscall() hang of an earlier milestone).
check-layers: $(LIB_OBJ) $(PRELOAD_OBJ) $(B)/libshortcut.so $(B)/calls.list
	tests/check-layers.sh $(B)

# the map true (every source file in docs/hacking.md and its layer's list)
# and functions short (tests/check-shape.py)
check-shape:
	tests/check-shape.py

# the same sources with clang, and with the non-x86 system-call path
check-build:
	tests/check-build.sh

# --- tests (tests/README.md: which test covers what) ----------------------
# unit tests: tests/core/test_*.c, one program per feature of the core and
# the run directory, each linked statically, and built twice more with
# sanitizers; tests/core/t_*.c are their helpers
TESTS   := $(patsubst tests/core/%.c,%,$(sort $(wildcard tests/core/test_*.c)))
T_SRC   := $(filter-out $(wildcard tests/core/test_*.c),$(wildcard tests/core/t_*.c))
T_HDRS  := $(wildcard tests/core/t_*.h)
.PHONY: check
$(B)/t/%: tests/core/%.c $(T_SRC) $(T_HDRS) $(B)/libshortcut.a | $(B)/t
	$(CC) $(BASE) $(INC_rundir) $(WARN) $(CFLAGS) -Itests/core -o $@ $< $(T_SRC) $(B)/libshortcut.a

# sanitizer builds: the library sources compiled straight into each test
SAN_ASAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_TSAN := -fsanitize=thread -Wno-tsan  # TSan does not model standalone fences; it still checks the atomics around them
$(B)/asan/%: tests/core/%.c $(T_SRC) $(T_HDRS) $(LIB_SRC) $(HDRS) | $(B)/asan
	$(CC) $(BASE) $(INC_rundir) $(WARN) -O1 -g $(SAN_ASAN) -Itests/core -o $@ $< $(T_SRC) $(LIB_SRC)
$(B)/tsan/%: tests/core/%.c $(T_SRC) $(T_HDRS) $(LIB_SRC) $(HDRS) | $(B)/tsan
	$(CC) $(BASE) $(INC_rundir) $(WARN) -O1 -g $(SAN_TSAN) -Itests/core -o $@ $< $(T_SRC) $(LIB_SRC)

# (TESTS=test_ring on the command line: that one only; TESTS=test_ring:wrap
# that scenario of it: the programs to build are the names before the colon)
T_PROGS = $(sort $(foreach t,$(TESTS),$(firstword $(subst :, ,$(t)))))
test-unit: all $(addprefix $(B)/t/,$(T_PROGS))
	tests/run-tests.sh $(B)/t $(TESTS)
test-asan: $(addprefix $(B)/asan/,$(T_PROGS))
	SC_TEST_SANITIZER=asan tests/run-tests.sh $(B)/asan $(TESTS)
test-tsan: $(addprefix $(B)/tsan/,$(T_PROGS))
	SC_TEST_SANITIZER=tsan tests/run-tests.sh $(B)/tsan $(TESTS)

# the interposer against the kernel: each program of tests/preload/<family>/
# runs on kernel TCP and under `shortcut run`; transcripts must match and
# stats show shared memory (SEM=NAME or SEM=FAMILY: those only)
test-preload: all
	tests/preload/run.sh $(B) $(SEM)

# the same with the interposer built with ASan+UBSan (the ASan runtime must
# come first in LD_PRELOAD; leak checking is off: the programs are not ours),
# and SC_LOCK_ORDER: each lock taken is checked against the lock order
# (src/core/lockorder.h)
$(B)/asan-so/libshortcut.so: $(LIB_SRC) $(PRELOAD) $(HDRS) VERSION $(B)/libshortcut.map
	mkdir -p $(B)/asan-so
	$(CC) $(BASE) $(INC_interposer) $(WARN) -O1 -g $(SAN_ASAN) -DSC_SYS_DIRECT -DSC_LOCK_ORDER -fPIC -fvisibility=hidden -shared -Wl,--version-script=$(B)/libshortcut.map -o $@ $(LIB_SRC) $(PRELOAD) -ldl
test-preload-asan: all $(B)/asan-so/libshortcut.so
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	SC_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so) $(CURDIR)/$(B)/asan-so/libshortcut.so" \
		tests/preload/run.sh $(B) $(SEM)

# one test of any kind, by name (tests/check.sh says how each is found):
#   make check T=test_ring          a unit test (SAN=asan or SAN=tsan: that build)
#   make check T=sem_dup            a preload oracle program (T=epoll: a family;
#                                   SAN=asan: with the ASan+UBSan interposer)
#   make check T=test_no_harm       an integration test file (pytest), or a node:
#   make check T=test_no_harm.py::test_marked_syn_flood_no_stall
check:
	@MAKE="$(MAKE)" tests/check.sh "$(T)" "$(SAN)"

# everything CI runs: plain, ASan+UBSan, TSan, the interposer, then pytest
test: check-layers check-shape check-build test-unit test-asan test-tsan fuzz-quick test-preload test-preload-asan
	tests/integration/run.sh

# libFuzzer harnesses (tests/fuzz/, clang): FUZZ_SECONDS each (FUZZ=NAME:
# fuzz_NAME only); make test runs them for a few seconds
FUZZ_SECONDS ?= 60
.PHONY: fuzz fuzz-quick
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ=$(FUZZ) tests/fuzz.sh $(B)
fuzz-quick:
	FUZZ_SECONDS=5 FUZZ= tests/fuzz.sh $(B)

# the crash soaks at length (make test runs their 30- to 40-round versions,
# pytest): kill -9 at random moments (set-up, mid-stream, mid-switch to TCP,
# around fork and exec), SOAK_ROUNDS times each
INTEGRITY_BYTES ?= 1e10
SOAK_ROUNDS ?= 1000
EXHAUST_CONNS ?= 10000
.PHONY: soak
soak: all
	SOAK_ROUNDS=$(SOAK_ROUNDS) python3 -m pytest -q -s tests/integration/test_soak.py
	INTEGRITY_BYTES=$(INTEGRITY_BYTES) python3 -m pytest -q -s tests/integration/test_integrity.py
	EXHAUST_CONNS=$(EXHAUST_CONNS) python3 -m pytest -q -s tests/integration/test_exhaustion.py -k many

demo: all
	$(B)/shortcut perf pingpong --size 64
	$(B)/shortcut perf stream --size 65536

$(B)/bench/sockbench: bench/sockbench.c
	mkdir -p $(B)/bench && $(CC) -std=gnu11 $(WARN) $(CFLAGS) -pthread -o $@ $<
$(B)/bench/echo: bench/echo.c
	mkdir -p $(B)/bench && $(CC) -std=gnu11 $(WARN) $(CFLAGS) -pthread -o $@ $<

$(B)/bench/empty_preload.so: bench/empty_preload.c
	mkdir -p $(B)/bench && $(CC) -std=gnu11 $(WARN) $(CFLAGS) -shared -fPIC -o $@ $<

bench: all $(B)/bench/sockbench $(B)/bench/echo $(B)/bench/empty_preload.so
	bench/run.sh

# the same in about three minutes: 3 repetitions, shorter runs
.PHONY: bench-quick
bench-quick: all $(B)/bench/sockbench $(B)/bench/echo $(B)/bench/empty_preload.so
	bench/run.sh --quick

FORCE:

# --- install (docs/install.md) --------------------------------------------
#   make install [PREFIX=/usr/local] [DESTDIR=/staging/root] [LIBDIR=...]
install: all
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(LIBDIR)' '$(DESTDIR)$(INCLUDEDIR)' \
		'$(DESTDIR)$(PKGCONFIGDIR)' '$(DESTDIR)$(MANDIR)/man1' '$(DESTDIR)$(MANDIR)/man3' \
		'$(DESTDIR)$(MANDIR)/man7' '$(DESTDIR)$(COMPLETIONSDIR)'
	install -m 755 $(B)/shortcut '$(DESTDIR)$(BINDIR)/shortcut'
	install -m 644 $(B)/libshortcut.so '$(DESTDIR)$(LIBDIR)/libshortcut.so.$(VERSION)'
	ln -sfn libshortcut.so.$(VERSION) '$(DESTDIR)$(LIBDIR)/$(SONAME)'
	ln -sfn $(SONAME) '$(DESTDIR)$(LIBDIR)/libshortcut.so'
	install -m 644 $(B)/libshortcut.a '$(DESTDIR)$(LIBDIR)/libshortcut.a'
	install -m 644 include/shortcut.h '$(DESTDIR)$(INCLUDEDIR)/shortcut.h'
	install -m 644 $(B)/shortcut.pc '$(DESTDIR)$(PKGCONFIGDIR)/shortcut.pc'
	install -m 644 $(B)/man/shortcut.1 '$(DESTDIR)$(MANDIR)/man1/shortcut.1'
	install -m 644 $(B)/man/libshortcut.3 '$(DESTDIR)$(MANDIR)/man3/libshortcut.3'
	install -m 644 $(B)/man/shortcut.7 '$(DESTDIR)$(MANDIR)/man7/shortcut.7'
	install -m 644 dist/shortcut.bash '$(DESTDIR)$(COMPLETIONSDIR)/shortcut'
	@# the loader's cache knows the new soname (not when staging)
	@[ -n '$(DESTDIR)' ] || [ "$$(id -u)" != 0 ] || ldconfig

# The Container Device Interface spec (shortcut cdi; docs/containers.md),
# only when asked, after make install: the paths it names are the installed
# ones, and a tmpfiles.d entry makes the run directory the containers
# share at each boot (now too, when not staging).
#   make install-cdi [PREFIX=...] [DESTDIR=...] [CDIDIR=/etc/cdi] [CDI_RUNDIR=/run/shortcut]
CDIDIR      ?= /etc/cdi
CDI_RUNDIR  ?= /run/shortcut
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
.PHONY: install-cdi uninstall-cdi
install-cdi: $(B)/shortcut
	install -d '$(DESTDIR)$(CDIDIR)' '$(DESTDIR)$(TMPFILESDIR)'
	$(B)/shortcut cdi --lib '$(LIBDIR)/$(SONAME)' --bin '$(BINDIR)/shortcut' \
		--rundir '$(CDI_RUNDIR)' --output '$(DESTDIR)$(CDIDIR)/shortcut.json'
	printf '# the run directory of shortcut cdi (shortcut(1)), shared by containers\nd %s 0700 root root -\n' \
		'$(CDI_RUNDIR)' > '$(DESTDIR)$(TMPFILESDIR)/shortcut.conf'
	chmod 644 '$(DESTDIR)$(TMPFILESDIR)/shortcut.conf'
	@[ -n '$(DESTDIR)' ] || install -d -m 700 '$(CDI_RUNDIR)'

uninstall-cdi:
	rm -f '$(DESTDIR)$(CDIDIR)/shortcut.json' '$(DESTDIR)$(TMPFILESDIR)/shortcut.conf'

uninstall:
	rm -f '$(DESTDIR)$(BINDIR)/shortcut' '$(DESTDIR)$(LIBDIR)/libshortcut.so.$(VERSION)' \
		'$(DESTDIR)$(LIBDIR)/$(SONAME)' '$(DESTDIR)$(LIBDIR)/libshortcut.so' \
		'$(DESTDIR)$(LIBDIR)/libshortcut.a' '$(DESTDIR)$(INCLUDEDIR)/shortcut.h' \
		'$(DESTDIR)$(PKGCONFIGDIR)/shortcut.pc' '$(DESTDIR)$(MANDIR)/man1/shortcut.1' \
		'$(DESTDIR)$(MANDIR)/man3/libshortcut.3' '$(DESTDIR)$(MANDIR)/man7/shortcut.7' \
		'$(DESTDIR)$(COMPLETIONSDIR)/shortcut'
	@[ -n '$(DESTDIR)' ] || [ "$$(id -u)" != 0 ] || ldconfig

# the Debian package, shortcut_VERSION_ARCH.deb in build/deb/, built from a
# copy of the sources with dpkg-buildpackage (debhelper), then lintian
deb:
	dist/mkdeb.sh $(B)

clean:
	rm -rf $(B)
