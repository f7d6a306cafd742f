# shortcut — build, test, bench.  `make` builds into build/.
CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
BASE    := -std=gnu11 -D_GNU_SOURCE -Iinclude -pthread -fno-strict-aliasing
B       := build

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
HDRS       := $(wildcard src/*/*.h) include/shortcut.h
# each layer sees its own headers and those below it
INC_core       := -Isrc/core
INC_rundir     := -Isrc/core -Isrc/rundir
INC_interposer := -Isrc/core -Isrc/rundir -Isrc/interposer
CLI_SRC := $(sort $(wildcard cli/*.c))

.PHONY: all test test-unit test-asan test-tsan test-preload test-preload-asan demo bench clean \
	check-layers check-build
all: $(B)/libshortcut.so $(B)/libshortcut.a $(B)/shortcut

# --- normal build ------------------------------------------------------
$(B)/obj/%.o: src/%.c $(HDRS) | $(B)/obj
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(INC_$(patsubst %/,%,$(dir $*))) $(WARN) $(CFLAGS) -DSC_SYS_DIRECT -fPIC \
		-fvisibility=hidden -c $< -o $@
$(B)/obj $(B)/t $(B)/asan $(B)/tsan:
	mkdir -p $@
LIB_OBJ := $(patsubst src/%.c,$(B)/obj/%.o,$(LIB_SRC))
PRELOAD_OBJ := $(patsubst src/%.c,$(B)/obj/%.o,$(PRELOAD))
# the exports: the public API and every call in calls.h, nothing else
$(B)/libshortcut.map: src/interposer/calls.h | $(B)/obj
	{ printf '{\n\tglobal:\n\t\tsc_*;\n'; \
	  printf '#include "calls.h"\n#define X(f, file) f;\n#define XT(f, file, t) f;\nSC_CALLS(X, XT)\n' | \
		$(CC) -E -P -Isrc/interposer - | tr ' ' '\n' | grep . | sed 's/^/\t\t/'; \
	  printf '\tlocal: *;\n};\n'; } > $@.tmp && mv $@.tmp $@
# the docs table of the same list (committed; test_library.py checks it)
docs/calls.md: src/interposer/calls.h
	{ printf '# The calls the interposer defines\n\nGenerated from `src/interposer/calls.h` '; \
	  printf '(`make docs/calls.md`): every libc function\n`libshortcut.so` defines, '; \
	  printf 'and the file of `src/interposer/` that handles it.\n\n| call | file |\n|---|---|\n'; \
	  printf '#include "calls.h"\n#define X(f, file) | `f` | `file.c` |@\n#define XT(f, file, t) X(f, file)\nSC_CALLS(X, XT)\n' | \
		$(CC) -E -P -Isrc/interposer - | tr '@' '\n' | sed 's/^ *//' | grep '^|'; } > $@.tmp && mv $@.tmp $@
$(B)/libshortcut.so: $(LIB_OBJ) $(PRELOAD_OBJ) $(B)/libshortcut.map
	$(CC) -shared -pthread -Wl,-z,defs -Wl,-z,now -Wl,--version-script=$(B)/libshortcut.map -o $@ $(filter %.o,$^) -ldl
$(B)/libshortcut.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^
$(B)/shortcut: $(CLI_SRC) $(wildcard cli/*.h) $(B)/libshortcut.a
	$(CC) $(BASE) $(INC_rundir) $(WARN) $(CFLAGS) -Icli -o $@ $(CLI_SRC) $(B)/libshortcut.a -lm

# The layers point one way: the core calls no function of the run
# directory's or the interposer's, the run directory none of the
# interposer's, and neither makes its own system calls through a libc name
# the interposer defines (inside a preloaded process that would call back
# into the interposer: the syscall() hang of an earlier milestone).
check-layers: $(LIB_OBJ) $(PRELOAD_OBJ) $(B)/libshortcut.so
	tests/check-layers.sh $(B)

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

# (TESTS=test_ring on the command line: that one only)
test-unit: all $(addprefix $(B)/t/,$(TESTS))
	tests/run-tests.sh $(B)/t $(TESTS)
test-asan: $(addprefix $(B)/asan/,$(TESTS))
	SC_TEST_SANITIZER=asan tests/run-tests.sh $(B)/asan $(TESTS)
test-tsan: $(addprefix $(B)/tsan/,$(TESTS))
	SC_TEST_SANITIZER=tsan tests/run-tests.sh $(B)/tsan $(TESTS)

# the interposer against the kernel: each program of tests/preload/<family>/
# runs on kernel TCP and under `shortcut run`; transcripts must match and
# stats show shared memory (SEM=NAME or SEM=FAMILY: those only)
test-preload: all
	tests/preload/run.sh $(B) $(SEM)

# the same with the interposer built with ASan+UBSan (the ASan runtime must
# come first in LD_PRELOAD; leak checking is off: the programs are not ours)
$(B)/asan-so/libshortcut.so: $(LIB_SRC) $(PRELOAD) $(HDRS) $(B)/libshortcut.map
	mkdir -p $(B)/asan-so
	$(CC) $(BASE) $(INC_interposer) $(WARN) -O1 -g $(SAN_ASAN) -DSC_SYS_DIRECT -fPIC -fvisibility=hidden -shared -Wl,--version-script=$(B)/libshortcut.map -o $@ $(LIB_SRC) $(PRELOAD) -ldl
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
test: check-layers check-build test-unit test-asan test-tsan test-preload test-preload-asan
	tests/integration/run.sh

demo: all
	$(B)/shortcut perf pingpong --size 64
	$(B)/shortcut perf stream --size 65536

$(B)/bench/sockbench: bench/sockbench.c
	mkdir -p $(B)/bench && $(CC) -std=gnu11 $(WARN) $(CFLAGS) -pthread -o $@ $<

bench: all $(B)/bench/sockbench
	bench/run.sh

# the same in about three minutes: 3 repetitions, shorter runs
.PHONY: bench-quick
bench-quick: all $(B)/bench/sockbench
	bench/run.sh --quick

clean:
	rm -rf $(B)
