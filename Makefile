# ckptfs — build, install, demo, test, bench.
#
#   make            build build/ckptfs and build/ckptfs-admin
#   make demo       install packages if missing, build, mount a local dir, save sample checkpoints
#   make check-layers  the include directions of docs/DESIGN.md "Layers" (in make test)
#   make test       install packages if missing, build, run unit + integration tests (also ASan+UBSan)
#   make bench      ratios against a plain directory, measured in the same run
#   make torture    the crash torture loop, 500 kill -9 cycles
#   make test-trainers  real trainers end to end (tests/trainers/README.md)
#   make test-packs the integration tests with -o packs=on on every mount (not in make test)
#   make fuzz       libFuzzer harnesses, FUZZ_SECONDS (600) each (tests/fuzz/README.md)
#   make install    PREFIX=/usr/local DESTDIR= (binaries, man pages, docs; mount.ckptfs in SBINDIR=/sbin)
#   make deb        the Debian package, build/deb/ckptfs_VERSION_ARCH.deb (scripts/debian/)
#   make test-deb   builds it, lintian, apt-get install, mounts with it, purges (root)

PREFIX  ?= /usr/local
DESTDIR ?=
SBINDIR ?= /sbin
MANDIR  ?= $(PREFIX)/share/man
DOCDIR  ?= $(PREFIX)/share/doc/ckptfs
BUILD   ?= build
CC      ?= cc

# c-blosc: by pkg-config when it has a blosc.pc (Debian's libblosc-dev), else -lblosc.
BLOSC_PKG = $(shell pkg-config --exists blosc 2>/dev/null && echo blosc)
PKGS      = fuse3 sqlite3 liblz4 libzstd $(BLOSC_PKG) libcrypto libnfs libmicrohttpd libpq
CFLAGS_BASE := -std=gnu11 -O2 -g -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wno-format-truncation \
	       -D_FILE_OFFSET_BITS=64 -DFUSE_USE_VERSION=314 -I. -Ifs/lib -Ifs -Imeta
SAN_FLAGS := -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# pkg-config is evaluated lazily so `make deps` can install it first.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(if $(BLOSC_PKG),,-lblosc) -lpthread

# Layers (docs/DESIGN.md "Layers"; `make check-layers` enforces the includes):
#   fs/lib/  the library: log, hash, crc32c, chunker, zipcut, codec, complete,
#            store, backing (dir | nfs://), bkobj, safeopen, claim, cachedir,
#            ticker, monoclock, control_proto, version. Includes only fs/lib/.
#   meta/    the catalog (SQLite). Includes only meta/ and fs/lib/.
#   fs/      the daemon. Its modules in SHARED_SRC are linked into
#            ckptfs-admin, the unit tests and the fuzzers too (rebuild, statset, ...).
#   tools/   ckptfs-admin. Includes fs/lib/, meta/ and SHARED_SRC's headers only.
LIB_SRC    := $(wildcard fs/lib/*.c)
META_SRC   := $(wildcard meta/*.c)
SHARED_SRC := $(wildcard fs/fuseinit.c fs/rebuild.c fs/rbpack.c fs/recent.c fs/storeq.c fs/proof.c fs/statset.c)
CORE_SRC   := $(LIB_SRC) $(META_SRC) $(SHARED_SRC)
DAEMON_SRC := $(filter-out $(CORE_SRC),$(wildcard fs/*.c))
ADMIN_SRC  := $(wildcard tools/*.c)
UNIT_SRC   := $(wildcard tests/unit/*.c)

CORE_OBJ   = $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
DAEMON_OBJ = $(DAEMON_SRC:%.c=$(BUILD)/obj/%.o)
ADMIN_OBJ  = $(ADMIN_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_OBJ   = $(UNIT_SRC:%.c=$(BUILD)/obj/%.o)

# Daemon services the unit tests link whole, with fakes of their dependencies
# handed in as handles and callbacks (never link-level stubs: every test file
# is linked into one binary). One line per module, added as each service is
# started with explicit handles (issue 17, step 6).
UNIT_DAEMON_SRC :=
UNIT_DAEMON_SRC += fs/reader.c
UNIT_DAEMON_SRC += fs/control.c fs/control_shared.c
UNIT_DAEMON_SRC += fs/uploader.c
UNIT_DAEMON_SRC += fs/uppack.c
UNIT_DAEMON_SRC += fs/cache.c
UNIT_DAEMON_SRC += fs/writer.c fs/chunkput.c fs/wbuf.c
# ns: the node table, the generation policy and the namespace (writer.c comes
# with tests/unit/test_writer.c, which compiles it in)
UNIT_DAEMON_SRC += fs/node.c fs/gen.c fs/ns.c
UNIT_DAEMON_OBJ = $(UNIT_DAEMON_SRC:%.c=$(BUILD)/obj/%.o)

.PHONY: all deps demo test check-layers test-unit test-integration test-packs test-asan test-nfs test-multinode bench install uninstall clean lint torture

all: $(BUILD)/ckptfs $(BUILD)/ckptfs-admin

$(BUILD)/obj/%.o: %.c $(wildcard fs/*.h fs/lib/*.h meta/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(EXTRA_CFLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/ckptfs: $(DAEMON_OBJ) $(CORE_OBJ)
	$(CC) $(EXTRA_CFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/ckptfs-admin: $(ADMIN_OBJ) $(CORE_OBJ)
	$(CC) $(EXTRA_CFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/unit-tests: $(UNIT_OBJ) $(CORE_OBJ) $(UNIT_DAEMON_OBJ)
	$(CC) $(EXTRA_CFLAGS) -o $@ $^ $(PKG_LIBS) -lcriterion

# A small CLI over fs/lib/backing.h, for tests/nfs/t_nfs.sh and by hand.
$(BUILD)/backing-tool: $(BUILD)/obj/tests/nfs/backing_tool.o $(CORE_OBJ)
	$(CC) $(EXTRA_CFLAGS) -o $@ $^ $(PKG_LIBS)

# fs/lib/codec.c's speed and ratio on a file, for make bench (phase 13).
$(BUILD)/codec-bench: $(BUILD)/obj/tests/bench/codec_bench.o $(CORE_OBJ)
	$(CC) $(EXTRA_CFLAGS) -o $@ $^ $(PKG_LIBS)

# BACKING over nfs:// against a private nfs-ganesha on 127.0.0.1 (tests/nfs/README.md).
test-nfs: deps $(BUILD)/backing-tool
	tests/nfs/t_nfs.sh $(BUILD)

# Several nodes (daemons on this machine) over one BACKING and one shared
# catalog on a private PostgreSQL 15 (tests/multinode/, docs/MULTINODE.md).
# One lane in make test for now: in one of three two-lane runs under load
# (session 44) t_remote's netns case saw ENOTCONN where EROFS was expected and
# t_rot2 saw two lock waiters; until that is understood the groups run one
# at a time here (CK_JOBS=2 by hand runs them in lanes).
test-multinode: deps all $(BUILD)/faultfs
	CK_JOBS=1 tests/multinode/run.sh $(BUILD)

# Installs what building and testing need (Debian). Quiet when all is there.
deps:
	@scripts/install-deps.sh

# make test runs these stages one after another; each prints "stage NAME
# took N s" when it ends, and the list of them is printed again at the end
# (also when a stage fails), so a CI log says where the time went. CK_JOBS
# is the number of lanes of the integration runs (tests/integration/run.sh:
# groups side by side, output printed whole and in order) and of fuzz-quick.
CK_JOBS     ?= 2
TEST_STAGES ?= $(CURDIR)/$(BUILD)/test-stages.txt
export CK_JOBS TEST_STAGES
# $(call ck_stage,NAME,COMMAND)
ck_stage = @echo "== stage $(1): $(2)"; s=$$(date +%s); rc=0; $(2) || rc=$$?; \
	line="stage $(1) took $$(($$(date +%s) - s)) s$$([ $$rc = 0 ] || echo ", FAILED with status $$rc")"; \
	echo "$$line"; mkdir -p $(dir $(TEST_STAGES)); echo "$$line" >>$(TEST_STAGES); \
	[ $$rc = 0 ] || { echo "== make test stages:"; cat $(TEST_STAGES); exit $$rc; }

test: deps
	@mkdir -p $(dir $(TEST_STAGES)); : >$(TEST_STAGES); date +%s >$(TEST_STAGES).start
	$(call ck_stage,check-layers,$(MAKE) check-layers)
	$(call ck_stage,build,$(MAKE) all $(BUILD)/unit-tests)
	$(call ck_stage,unit,$(MAKE) test-unit)
	$(call ck_stage,fuzz-quick,$(MAKE) fuzz-quick)
	$(call ck_stage,integration,$(MAKE) test-integration)
	$(call ck_stage,trainers,$(MAKE) test-trainers)
	$(call ck_stage,faultfs,$(MAKE) test-faultfs)
	$(call ck_stage,nullfs,$(MAKE) test-nullfs)
	$(call ck_stage,nfs,$(MAKE) test-nfs)
	$(call ck_stage,multinode,$(MAKE) test-multinode)
	$(call ck_stage,docker,$(MAKE) check-docker)
	$(call ck_stage,examples,$(MAKE) check-examples)
	$(call ck_stage,deb,$(MAKE) test-deb)
	$(call ck_stage,asan-build,$(MAKE) asan-build)
	$(call ck_stage,asan-unit,$(MAKE) test-asan-unit)
	$(call ck_stage,asan-integration,$(MAKE) test-asan-integration)
	@echo "== make test stages:"; cat $(TEST_STAGES); \
	echo "make test took $$(($$(date +%s) - $$(cat $(TEST_STAGES).start))) s (deps before the first stage included)"

# Eight tests at a time on two cores: most of them wait (a PostgreSQL server
# of their own starting, a lease running out), not compute, and each has its
# own temp dirs, server socket directory and network namespace key. Measured
# 2026-11-29 under load: --jobs 4 116 s (30 s user, 42 s system), --jobs 8
# 83 s (31 s user, 38 s system), all passing.
test-unit: $(BUILD)/unit-tests
	$(BUILD)/unit-tests --jobs 8

test-integration: all $(BUILD)/faultfs $(BUILD)/backing-tool $(BUILD)/synclog.so $(BUILD)/swaptop
	tests/integration/run.sh $(BUILD)

# The integration suite again with -o packs=on on every mount the tests make
# (CKPTFS_TEST_MOUNT_OPTS, tests/integration/lib.sh ck_opts). Not in `make test`.
test-packs: all $(BUILD)/faultfs $(BUILD)/backing-tool $(BUILD)/synclog.so $(BUILD)/swaptop
	CKPTFS_TEST_MOUNT_OPTS=packs=on tests/integration/run.sh $(BUILD)

# The same unit and integration tests, built with AddressSanitizer + UBSan.
# LeakSanitizer is on for the daemons too: a leak at exit makes the daemon's
# status non-zero and puts a report in its stderr, and the case fails
# (ck_daemon_exit in tests/integration/lib.sh). The unit tests run one at a
# time per criterion runner here: criterion 2.4's runner itself leaks 48
# bytes now and then when it runs tests in parallel and suites have timeouts,
# which LeakSanitizer rightly reports but which is not ours. Four runners run
# side by side instead (tests/unit/lanes.sh): one per list of ASAN_UNIT_LANES
# (lists separated by spaces), and one for every other suite, so every test
# runs once whatever suites are added. Balanced by the seconds of each suite
# in a two-runner run (2026-11-29, under load): pggen|pgns 78 s of tests +
# a PostgreSQL server each, catshared* 69 s + one each, the third list 127 s
# (197 tests), every other suite 57 s (536 tests: ASan's start of each test
# costs ~0.15 s). Two runners took 229 s and 296 s; the first two lanes
# mostly wait. test-asan is the three steps below (make test runs them as
# stages of their own).
ASAN_UNIT_LANES ?= pggen|pgns catshared* claim*|lease*|complete|uploader|cache|backing
.PHONY: asan-build test-asan-unit test-asan-integration
test-asan: asan-build
	$(MAKE) test-asan-unit
	$(MAKE) test-asan-integration

asan-build:
	$(MAKE) BUILD=build-asan EXTRA_CFLAGS="$(SAN_FLAGS)" all build-asan/unit-tests build-asan/faultfs build-asan/backing-tool build-asan/synclog.so build-asan/swaptop

test-asan-unit: asan-build
	ASAN_OPTIONS=detect_leaks=1 tests/unit/lanes.sh build-asan/unit-tests '$(ASAN_UNIT_LANES)'

test-asan-integration: asan-build
	ASAN_OPTIONS=detect_leaks=1 CKPTFS_TEST_QUICK=1 tests/integration/run.sh build-asan

# The crash torture loop, longer than in `make test` (CYCLES=N to change).
CYCLES ?= 500
torture: deps all
	CKPTFS_TORTURE_CYCLES=$(CYCLES) tests/integration/run.sh $(BUILD) t_torture

demo: deps all
	scripts/demo.sh $(BUILD)

bench: deps all
	scripts/bench.sh $(BUILD)

# mount(8) looks for its helpers in /sbin only (and runs them with no PATH),
# whatever PREFIX is: mount.ckptfs carries the path of the ckptfs it starts.
install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/ckptfs $(BUILD)/ckptfs-admin $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8
	install -m 644 docs/ckptfs-admin.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 docs/ckptfs.8 $(DESTDIR)$(MANDIR)/man8/
	install -d $(DESTDIR)$(DOCDIR)/examples
	install -m 644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	install -m 644 docs/examples/mnt-ckpt.mount docs/examples/ckptfs-ckpt.service \
		docs/examples/fstab.example $(DESTDIR)$(DOCDIR)/examples/
	install -d $(DESTDIR)$(SBINDIR)
	sed 's#@BINDIR@#$(PREFIX)/bin#g' scripts/mount.ckptfs >$(DESTDIR)$(SBINDIR)/mount.ckptfs
	chmod 755 $(DESTDIR)$(SBINDIR)/mount.ckptfs
	ln -sf mount.ckptfs $(DESTDIR)$(SBINDIR)/mount.fuse.ckptfs

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/ckptfs $(DESTDIR)$(PREFIX)/bin/ckptfs-admin
	rm -f $(DESTDIR)$(MANDIR)/man1/ckptfs-admin.1 $(DESTDIR)$(MANDIR)/man8/ckptfs.8
	rm -rf $(DESTDIR)$(DOCDIR)
	rm -f $(DESTDIR)$(SBINDIR)/mount.ckptfs $(DESTDIR)$(SBINDIR)/mount.fuse.ckptfs

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability -I fs/lib -I fs -I meta fs meta tools

# meta/ and fs/lib/ include nothing of the daemon (scripts/check-layers.sh).
check-layers:
	scripts/check-layers.sh

clean:
	rm -rf build build-asan build-dev build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
# The .d files of a build older than fs/lib/ name headers that moved there:
# such a name is stale, not missing (its object is rebuilt). -MP does this
# for the .d files written since.
fs/%.h: ;

# ---- faultfs, Docker and packaging checks (tests/faultfs/README.md, docs/DOCKER.md)
.PHONY: test-faultfs test-nullfs check-docker check-examples

# The fault-injecting passthrough mount that integration tests put under BACKING.
$(BUILD)/faultfs: tests/faultfs/faultfs.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(EXTRA_CFLAGS) $(shell pkg-config --cflags fuse3) $< -o $@ \
		$(shell pkg-config --libs fuse3)

# The LD_PRELOAD shim that logs the daemon's fsyncs and unlinks in order
# (tests/integration/lib.sh ck_mount_synclog): what is durable when.
$(BUILD)/synclog.so: tests/integration/helpers/synclog.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -shared -fPIC $< -o $@ -ldl

# The attacker of t_copyrace (review 40 F1): swaps a new entry for a symlink.
$(BUILD)/swaptop: tests/integration/helpers/swaptop.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $< -o $@

test-faultfs: deps $(BUILD)/faultfs
	tests/faultfs/t_faultfs.sh $(BUILD)/faultfs

# The FUSE floor: a filesystem that stores nothing, for make bench (docs/BENCH.md).
$(BUILD)/nullfs: tests/nullfs/nullfs.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(EXTRA_CFLAGS) $(shell pkg-config --cflags fuse3) $< -o $@ \
		$(shell pkg-config --libs fuse3) -lpthread

test-nullfs: deps $(BUILD)/nullfs
	tests/nullfs/t_nullfs.sh $(BUILD)/nullfs

# Docker files, checked as far as a machine without a Docker daemon can (docs/DOCKER.md).
check-docker: deps all
	docker/check.sh $(BUILD)

# docs/examples (fstab line, systemd mount unit) mounted for real through mount(8); root.
check-examples: deps all
	docs/examples/check_fstab.sh $(BUILD)

# ---- real trainers end to end (tests/trainers/README.md)
.PHONY: test-trainers
test-trainers: deps all
	tests/trainers/run.sh $(BUILD)

# ---- fuzzing (tests/fuzz/README.md)
# Every tests/fuzz/fuzz_*.c is a harness. Each links the library below, built
# with clang, coverage and ASan+UBSan: CORE_SRC (fs/lib/complete.c is in
# it). An archive, so a harness pulls in only the objects it needs.
.PHONY: fuzz fuzz-quick fuzz-build fuzz-seeds
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 600
FUZZ_QUICK_SECONDS ?= 20
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  := $(filter-out -O2 -Werror -Wno-format-truncation,$(CFLAGS_BASE)) -O1 -g $(FUZZ_SAN)
FUZZ_LIB_SRC  = $(sort $(CORE_SRC))
FUZZ_LIB_OBJ  = $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)

$(FUZZ_BUILD)/obj/%.o: %.c $(wildcard fs/*.h fs/lib/*.h meta/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -c $< -o $@

$(FUZZ_BUILD)/libckptfs.a: $(FUZZ_LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

# the harnesses themselves build with -Werror, as the project's code does
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_BUILD)/libckptfs.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Werror -fsanitize=fuzzer $(PKG_CFLAGS) $< -o $@ \
		$(FUZZ_BUILD)/libckptfs.a $(PKG_LIBS)

fuzz-build: deps $(FUZZ_BIN)

# Each harness FUZZ_QUICK_SECONDS from the committed corpus; fails on a finding.
fuzz-quick: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_QUICK_SECONDS)

# Each harness FUZZ_SECONDS; what adds coverage is merged into tests/fuzz/corpus.
fuzz: fuzz-build
	MERGE=1 tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The seeds, written by the project's own encoders (tests/fuzz/seedgen.c).
$(BUILD)/seedgen: $(BUILD)/obj/tests/fuzz/seedgen.o $(CORE_OBJ)
	$(CC) $(EXTRA_CFLAGS) -o $@ $^ $(PKG_LIBS)

fuzz-seeds: $(BUILD)/seedgen
	$(BUILD)/seedgen tests/fuzz/corpus

# ---- the Debian package (scripts/debian/, README "Debian package")
.PHONY: deb test-deb

# build/deb/ckptfs_VERSION_ARCH.deb (+ -dbgsym, .buildinfo, .changes), built by
# dpkg-buildpackage in a copy of the sources (scripts/build-deb.sh).
deb: deps
	@scripts/install-pkg-deps.sh
	scripts/build-deb.sh build/deb

# lintian (no errors), apt-get install on this machine, mounts with the
# installed binaries and mount helper, apt-get purge; root (scripts/test-deb.sh).
test-deb: deb
	scripts/test-deb.sh build/deb
