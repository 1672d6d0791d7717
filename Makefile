# SPDX-License-Identifier: Apache-2.0
# nvl72-operator build. Every .c under src/<module>/ (but src/cmd/) goes into
# libnvl72.a; src/cmd/*_main.c become the binaries. Three variants share the
# rules: rel (the shipped build), test (unit-test hooks on) and asan
# (ASan+UBSan); fuzz targets build with clang and libFuzzer.

VERSION := 0.1.0
BUILD   ?= build
CC      ?= gcc
FUZZCC  ?= clang
PKGS    := libcurl jansson yaml-0.1 libwebsockets openssl libnghttp2
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

WARN := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion \
	-Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wwrite-strings \
	-Wvla -Werror
BASEFLAGS := $(WARN) -D_GNU_SOURCE -DNVL72_VERSION='"$(VERSION)"' -Iinclude \
	-MMD -MP -g $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm -ldl
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

CFLAGS_rel  := -O2 -D_FORTIFY_SOURCE=3 -fstack-protector-strong -fPIE
LDFLAGS_rel := -pie -Wl,-z,relro,-z,now
CFLAGS_test := -O1 -DNVL72_UNIT_TEST
LDFLAGS_test :=
CFLAGS_asan := -O1 -DNVL72_UNIT_TEST -fsanitize=address,undefined \
	-fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS_asan := -fsanitize=address,undefined

LIB_SRC   := $(sort $(filter-out src/cmd/%,$(wildcard src/*/*.c)))
CMD_SRC   := $(sort $(wildcard src/cmd/*_main.c))
UNIT_SRC  := $(sort $(wildcard tests/unit/*/test_*.c))
ITEST_SRC := $(sort $(wildcard tests/integration/test_*.c))
SIM_SRC   := $(sort $(wildcard tests/sim/*.c))
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
BENCH_SRC := $(sort $(wildcard bench/bench_*.c))
# Helpers shared by several unit tests (not test programs themselves).
UNIT_HELP := $(sort $(wildcard tests/unit/*.c))

# name_main.c -> nvl72-name (kubectl_nvl72_main.c -> kubectl-nvl72).
cmd_name = $(subst _,-,$(if $(filter kubectl_nvl72,$(1)),$(1),nvl72-$(1)))
CMD_BINS := $(foreach s,$(CMD_SRC),$(BUILD)/rel/bin/$(call cmd_name,$(patsubst src/cmd/%_main.c,%,$(s))))

.PHONY: all check unit asan demo bench fuzz soak clean deps cluster help cross lint images
# Keep the objects of test programs between runs.
.SECONDARY:
all: $(CMD_BINS) $(BUILD)/rel/libnvl72.a

# variant template: $(1) = rel | test | asan
define VARIANT
$(BUILD)/$(1)/obj/%.o: %.c
	@mkdir -p $$(@D)
	$$(CC) $$(BASEFLAGS) $$(CFLAGS_$(1)) -c $$< -o $$@

$(BUILD)/$(1)/libnvl72.a: $(patsubst %.c,$(BUILD)/$(1)/obj/%.o,$(LIB_SRC))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^

$(1)_UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/$(1)/tests/unit/%,$(UNIT_SRC))
$(BUILD)/$(1)/tests/unit/%: $(BUILD)/$(1)/obj/tests/unit/%.o $(patsubst %.c,$(BUILD)/$(1)/obj/%.o,$(UNIT_HELP)) $(BUILD)/$(1)/libnvl72.a
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS_$(1)) $$(LDFLAGS_$(1)) $$(filter %.o,$$^) $(BUILD)/$(1)/libnvl72.a $$(CMOCKA_LIBS) $$(LIBS) -o $$@
endef
$(eval $(call VARIANT,rel))
$(eval $(call VARIANT,test))
$(eval $(call VARIANT,asan))

$(BUILD)/rel/bin/nvl72-%: $(BUILD)/rel/obj/src/cmd/%_main.o $(BUILD)/rel/libnvl72.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_rel) $(LDFLAGS_rel) $< $(BUILD)/rel/libnvl72.a $(LIBS) -o $@
$(BUILD)/rel/bin/kubectl-nvl72: $(BUILD)/rel/obj/src/cmd/kubectl_nvl72_main.o $(BUILD)/rel/libnvl72.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_rel) $(LDFLAGS_rel) $< $(BUILD)/rel/libnvl72.a $(LIBS) -o $@

# Integration programs run against a real control plane, built with
# ASan+UBSan so the client's code paths are checked under real traffic.
ITEST_BINS := $(patsubst tests/integration/%.c,$(BUILD)/asan/tests/integration/%,$(ITEST_SRC))
$(BUILD)/asan/tests/integration/%: $(BUILD)/asan/obj/tests/integration/%.o $(BUILD)/asan/libnvl72.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_asan) $(LDFLAGS_asan) $< $(BUILD)/asan/libnvl72.a $(CMOCKA_LIBS) $(LIBS) -o $@

# A release build of one, for measuring: make build/rel/tests/integration/NAME
$(BUILD)/rel/tests/integration/%: $(BUILD)/rel/obj/tests/integration/%.o $(BUILD)/rel/libnvl72.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_rel) $(LDFLAGS_rel) $< $(BUILD)/rel/libnvl72.a $(CMOCKA_LIBS) $(LIBS) -o $@

# The binaries once more under ASan+UBSan (`make asan`).
ASAN_CMD_BINS := $(subst /rel/,/asan/,$(CMD_BINS))
$(BUILD)/asan/bin/nvl72-%: $(BUILD)/asan/obj/src/cmd/%_main.o $(BUILD)/asan/libnvl72.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_asan) $(LDFLAGS_asan) $< $(BUILD)/asan/libnvl72.a $(LIBS) -o $@
$(BUILD)/asan/bin/kubectl-nvl72: $(BUILD)/asan/obj/src/cmd/kubectl_nvl72_main.o $(BUILD)/asan/libnvl72.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_asan) $(LDFLAGS_asan) $< $(BUILD)/asan/libnvl72.a $(LIBS) -o $@

BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/rel/bench/%,$(BENCH_SRC))
# The load generator is a tool of bench_scale.sh, not a benchmark of its own.
BENCH_RUN  := $(filter-out %/bench_loadgen,$(BENCH_BINS))
$(BUILD)/rel/bench/%: $(BUILD)/rel/obj/bench/%.o $(BUILD)/rel/libnvl72.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_rel) $(LDFLAGS_rel) $< $(BUILD)/rel/libnvl72.a $(LIBS) -o $@

# libFuzzer targets: the library is rebuilt with clang and coverage.
FUZZFLAGS := $(filter-out -Wformat=2,$(BASEFLAGS)) -O1 -DNVL72_UNIT_TEST \
	-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
FUZZ_OBJ  := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(LIB_SRC))
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZCC) $(FUZZFLAGS) -c $< -o $@
$(BUILD)/fuzz/%: $(BUILD)/fuzz/obj/tests/fuzz/%.o $(FUZZ_OBJ)
	@mkdir -p $(@D)
	$(FUZZCC) -fsanitize=fuzzer,address,undefined $^ $(LIBS) -o $@

unit: deps $(test_UNIT_BINS)
	BUILD=$(BUILD) tests/run-unit.sh test $(test_UNIT_BINS)
# The checks of the source itself (layer order, format, banned calls,
# cppcheck), without building anything; `make check` runs them first.
lint: deps
	BUILD=$(BUILD) tests/lint/run.sh
asan: deps $(asan_UNIT_BINS) $(ASAN_CMD_BINS) $(ITEST_BINS)
	BUILD=$(BUILD) tests/run-unit.sh asan $(asan_UNIT_BINS)

# The whole suite: unit tests plain and under ASan+UBSan, a short fuzz run
# of every target, then the integration suites against a real apiserver.
# The test control plane (Go: about twelve minutes with an empty cache)
# builds in the background from the start, beside the C build and the
# stages before the integration suites, which leave a core idle most of the
# time (one unit test or fuzz target at a time); the suites' runner waits
# for it on the build's lock.
check: deps
	@mkdir -p $(BUILD) && { tests/cluster/build.sh core all >$(BUILD)/cluster-build.log 2>&1 & } && \
		echo "check: the test control plane builds in the background ($(BUILD)/cluster-build.log)"
	$(MAKE) -j$(JOBS) all $(test_UNIT_BINS) $(asan_UNIT_BINS) $(FUZZ_BINS) $(ITEST_BINS) $(CHECK_EXTRA) \
		$(BUILD)/rel/bench/bench_loadgen
	BUILD=$(BUILD) tests/check.sh

# The reliability suite again and again for SOAK_SECONDS (default 600), each
# round on a fresh control plane; prints every round and the totals.
soak: deps
	$(MAKE) -j$(JOBS) all $(BUILD)/rel/bench/bench_loadgen
	BUILD=$(BUILD) SOAK_SECONDS=$${SOAK_SECONDS:-600} tests/soak.sh

# arm64 binaries for the compute trays (Grace is aarch64), built with
# Debian's cross compiler against the arm64 packages tests/deps.sh installs;
# libwebsockets' arm64 headers come from a sysroot in the cache (see there).
# On an arm64 machine the native compiler builds the same thing.
CROSS_CC      ?= $(if $(filter aarch64,$(shell uname -m)),$(CC),aarch64-linux-gnu-gcc)
CROSS_AR      ?= $(if $(filter aarch64,$(shell uname -m)),ar,aarch64-linux-gnu-ar)
NVL72_CACHE   ?= $(HOME)/.cache/nvl72-operator
CROSS_SYSROOT ?= $(NVL72_CACHE)/arm64
CROSS_PC      := PKG_CONFIG_LIBDIR=$(CROSS_SYSROOT)/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig pkg-config
CROSS_FLAGS    = $(WARN) -D_GNU_SOURCE -DNVL72_VERSION='"$(VERSION)"' -Iinclude \
	-I$(CROSS_SYSROOT)/usr/include -MMD -MP -g $(CFLAGS_rel) \
	$(shell $(CROSS_PC) --cflags $(PKGS) 2>/dev/null)
CROSS_LIBS     = -L$(CROSS_SYSROOT)/usr/lib/aarch64-linux-gnu \
	$(shell $(CROSS_PC) --libs $(PKGS) 2>/dev/null) -lpthread -lm -ldl
CROSS_BINS    := $(BUILD)/arm64/bin/nvl72-agent $(BUILD)/arm64/bin/nvl72-operator

$(BUILD)/arm64/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CROSS_CC) $(CROSS_FLAGS) -c $< -o $@
$(BUILD)/arm64/obj/gen/web_assets.o: $(BUILD)/gen/web_assets.c src/web/web_assets.h
	@mkdir -p $(@D)
	$(CROSS_CC) $(filter-out -MMD -MP,$(CROSS_FLAGS)) $(WEB_GENFLAGS) -c $< -o $@
$(BUILD)/arm64/libnvl72.a: $(patsubst %.c,$(BUILD)/arm64/obj/%.o,$(LIB_SRC)) $(BUILD)/arm64/obj/gen/web_assets.o
	@mkdir -p $(@D)
	rm -f $@ && $(CROSS_AR) rcs $@ $^
$(BUILD)/arm64/bin/nvl72-%: $(BUILD)/arm64/obj/src/cmd/%_main.o $(BUILD)/arm64/libnvl72.a
	@mkdir -p $(@D)
	$(CROSS_CC) $(CFLAGS_rel) $(LDFLAGS_rel) $< $(BUILD)/arm64/libnvl72.a $(CROSS_LIBS) -o $@

cross: deps
	$(MAKE) -j$(JOBS) $(CROSS_BINS)
	@for b in $(CROSS_BINS); do \
		file -b $$b | grep -q 'ARM aarch64' || { echo "cross: $$b is not an aarch64 binary: $$(file -b $$b)"; exit 1; }; \
		echo "cross: $$b: $$(file -b $$b | cut -d, -f1-2)"; \
	done

fuzz: deps
	$(MAKE) -j$(JOBS) $(FUZZ_BINS)
	FUZZ_SECONDS=$${FUZZ_SECONDS:-120} tests/run-fuzz.sh $(FUZZ_BINS)

# Benchmarks are programs (bench/bench_*.c) and scripts (bench/bench_*.sh)
# that print what they measure; none of them asserts a number.
BENCH_SH := $(sort $(wildcard bench/bench_*.sh))
bench: deps
	$(MAKE) -j$(JOBS) all sim $(BENCH_BINS)
	BUILD=$(BUILD) bench/run.sh $(BENCH_RUN) $(BENCH_SH)

# MODE=helm: the same rack on a real node, from the images and the chart.
MODE ?=
demo: deps
	$(MAKE) -j$(JOBS) all sim
ifeq ($(MODE),helm)
	tests/demo-helm.sh
else ifeq ($(MODE),)
	tests/demo.sh
else
	$(error MODE=$(MODE): the demo modes are the default (empty) and helm)
endif

deps:
	@tests/deps.sh

cluster:
	tests/cluster/build.sh all node

# The operator and agent images from deploy/docker/ as reproducible OCI
# archives with SPDX SBOMs in $(BUILD)/images, on a Debian base made here
# (as root; IMAGE_ARCHES="amd64 arm64"; docs/images.md).
images: deps
	$(MAKE) -j$(JOBS) $(CMD_BINS) $(if $(filter arm64,$(IMAGE_ARCHES)),$(if $(filter aarch64,$(shell uname -m)),,$(CROSS_BINS)))
	deploy/docker/images.sh $(BUILD)

clean:
	rm -rf $(BUILD)

help:
	@echo "make            build nvl72-operator, nvl72-agent and kubectl-nvl72 into $(BUILD)/rel/bin"
	@echo "make check      the full test suite (installs what it needs)"
	@echo "make demo       a control plane, one simulated rack with its agents, two operators"
	@echo "make demo MODE=helm  the same rack on a real node, from the images and the chart (root)"
	@echo "make unit       unit tests; make asan: tests and binaries under ASan+UBSan"
	@echo "make lint       layer order, format, banned calls, late shell statuses and cppcheck (docs/internals/checks.md)"
	@echo "make fuzz       every fuzz target for FUZZ_SECONDS (default 120) each"
	@echo "make bench      benchmarks; results in bench/results/"
	@echo "make soak       the reliability suite repeated for SOAK_SECONDS (default 600)"
	@echo "make sim        the tray simulator (fake NVML, IMEX tools, simctl)"
	@echo "make cluster    build the test control plane and the test node (cached)"
	@echo "make images     operator and agent images as OCI archives with SBOMs in $(BUILD)/images"
	@echo "make cross      arm64 nvl72-agent and nvl72-operator into $(BUILD)/arm64/bin"

# Module-specific rules (the simulator's shared library and tools, ...);
# a fragment adds what `make check` must also build to CHECK_EXTRA.
include $(sort $(wildcard src/*/*.mk tests/*/*.mk))

-include $(shell find $(BUILD) -name '*.d' -type f -not -path '$(BUILD)/demo*' 2>/dev/null)
