# shortcut — build, test, bench.  `make` builds into build/.
CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
BASE    := -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -pthread -fno-strict-aliasing
B       := build

# socket.c is the LD_PRELOAD interposer: in the shared library only (linked
# into a test program it would replace that program's own read/write/close)
PRELOAD := src/socket.c
LIB_SRC := $(sort $(filter-out $(PRELOAD),$(wildcard src/*.c)))
CLI_SRC := $(sort $(wildcard cli/*.c))
TESTS   := $(patsubst tests/%.c,%,$(sort $(wildcard tests/test_*.c)))
T_SRC   := $(filter-out $(wildcard tests/test_*.c),$(wildcard tests/t_*.c))

.PHONY: all test test-unit test-asan test-tsan test-preload test-preload-asan demo bench clean
all: $(B)/libshortcut.so $(B)/libshortcut.a $(B)/shortcut

# --- normal build ------------------------------------------------------
$(B)/obj/%.o: src/%.c $(wildcard src/*.h) include/shortcut.h | $(B)/obj
	$(CC) $(BASE) $(WARN) $(CFLAGS) -DSC_SYS_DIRECT -fPIC -fvisibility=hidden -c $< -o $@
$(B)/obj $(B)/t $(B)/asan $(B)/tsan:
	mkdir -p $@
LIB_OBJ := $(patsubst src/%.c,$(B)/obj/%.o,$(LIB_SRC))
$(B)/libshortcut.so: $(LIB_OBJ) $(B)/obj/socket.o src/libshortcut.map
	$(CC) -shared -pthread -Wl,-z,defs -Wl,--version-script=src/libshortcut.map -o $@ $(filter %.o,$^) -ldl
$(B)/libshortcut.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^
$(B)/shortcut: $(CLI_SRC) $(wildcard cli/*.h) $(B)/libshortcut.a
	$(CC) $(BASE) $(WARN) $(CFLAGS) -Icli -o $@ $(CLI_SRC) $(B)/libshortcut.a -lm

# --- tests: one program per feature, linked statically -------------------
$(B)/t/%: tests/%.c $(T_SRC) tests/t_util.h $(B)/libshortcut.a | $(B)/t
	$(CC) $(BASE) $(WARN) $(CFLAGS) -Itests -o $@ $< $(T_SRC) $(B)/libshortcut.a

# sanitizer builds: the library sources compiled straight into each test
SAN_ASAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_TSAN := -fsanitize=thread -Wno-tsan  # TSan does not model standalone fences; it still checks the atomics around them
$(B)/asan/%: tests/%.c $(T_SRC) $(LIB_SRC) $(wildcard src/*.h) | $(B)/asan
	$(CC) $(BASE) $(WARN) -O1 -g $(SAN_ASAN) -Itests -o $@ $< $(T_SRC) $(LIB_SRC)
$(B)/tsan/%: tests/%.c $(T_SRC) $(LIB_SRC) $(wildcard src/*.h) | $(B)/tsan
	$(CC) $(BASE) $(WARN) -O1 -g $(SAN_TSAN) -Itests -o $@ $< $(T_SRC) $(LIB_SRC)

test-unit: all $(addprefix $(B)/t/,$(TESTS))
	tests/run-tests.sh $(B)/t $(TESTS)
test-asan: $(addprefix $(B)/asan/,$(TESTS))
	SC_TEST_SANITIZER=asan tests/run-tests.sh $(B)/asan $(TESTS)
test-tsan: $(addprefix $(B)/tsan/,$(TESTS))
	SC_TEST_SANITIZER=tsan tests/run-tests.sh $(B)/tsan $(TESTS)

# the interposer against the kernel: each program runs on kernel TCP and
# under `shortcut run`; transcripts must match and stats show shared memory
test-preload: all
	tests/preload/run.sh $(B)

# the same with the interposer built with ASan+UBSan (the ASan runtime must
# come first in LD_PRELOAD; leak checking is off: the programs are not ours)
$(B)/asan-so/libshortcut.so: $(LIB_SRC) $(PRELOAD) $(wildcard src/*.h) src/libshortcut.map
	mkdir -p $(B)/asan-so
	$(CC) $(BASE) $(WARN) -O1 -g $(SAN_ASAN) -DSC_SYS_DIRECT -fPIC -fvisibility=hidden -shared -Wl,--version-script=src/libshortcut.map -o $@ $(LIB_SRC) $(PRELOAD) -ldl
test-preload-asan: all $(B)/asan-so/libshortcut.so
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	SC_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so) $(CURDIR)/$(B)/asan-so/libshortcut.so" \
		tests/preload/run.sh $(B)

# everything CI runs: plain, ASan+UBSan, TSan, the interposer, then pytest
test: test-unit test-asan test-tsan test-preload test-preload-asan
	tests/integration/run.sh

demo: all
	$(B)/shortcut perf pingpong --size 64
	$(B)/shortcut perf stream --size 65536

$(B)/bench/sockbench: bench/sockbench.c
	mkdir -p $(B)/bench && $(CC) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $<

bench: all $(B)/bench/sockbench
	bench/run.sh

# the same in about three minutes: 3 repetitions, shorter runs
.PHONY: bench-quick
bench-quick: all $(B)/bench/sockbench
	bench/run.sh --quick

clean:
	rm -rf $(B)
