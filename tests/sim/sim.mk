# SPDX-License-Identifier: Apache-2.0
# The tray simulator: the fake libnvidia-ml.so.1 (standalone, position
# independent), the fake host tools, simctl, hostprobe (which links the
# release library to drive the agent's host layer), fake-nmxm, the NMX-M
# stand-in of the partition suite, and libclockshift.so, the host's wall
# clock moved for one process (LD_PRELOAD). Included by the top
# Makefile; `make sim` builds it all into $(BUILD)/sim.

SIM_DIR := $(BUILD)/sim
SIM_LIB := $(SIM_DIR)/lib/libnvidia-ml.so.1
SIM_CLOCK := $(SIM_DIR)/lib/libclockshift.so
SIM_TOOL_NAMES := modprobe modinfo systemctl nvl72-sim-installer nvl72-sim-validate
SIM_TOOLS := $(addprefix $(SIM_DIR)/bin/,$(SIM_TOOL_NAMES))
SIM_BINS := $(addprefix $(SIM_DIR)/bin/,nvidia-imex nvidia-imex-ctl simctl hostprobe \
	fake-host-tool fake-nmxm) $(SIM_TOOLS)
SIM_CFLAGS := $(BASEFLAGS) $(filter-out -fPIE,$(CFLAGS_rel))

$(SIM_DIR)/pic/%.o: tests/sim/%.c
	@mkdir -p $(@D)
	$(CC) $(SIM_CFLAGS) -fPIC -c $< -o $@
$(SIM_DIR)/obj/%.o: tests/sim/%.c
	@mkdir -p $(@D)
	$(CC) $(SIM_CFLAGS) -fPIE -c $< -o $@

$(SIM_LIB): $(SIM_DIR)/pic/fake_nvml.o $(SIM_DIR)/pic/sim.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libnvidia-ml.so.1 -Wl,-z,relro,-z,now $^ -o $@
$(SIM_CLOCK): $(SIM_DIR)/pic/clockshift.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-z,relro,-z,now $^ -ldl -o $@
$(SIM_DIR)/bin/nvidia-imex: $(SIM_DIR)/obj/fake_imex.o $(SIM_DIR)/obj/sim.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_rel) $^ -o $@
$(SIM_DIR)/bin/nvidia-imex-ctl: $(SIM_DIR)/obj/fake_imex_ctl.o $(SIM_DIR)/obj/sim.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_rel) $^ -o $@
$(SIM_DIR)/bin/fake-host-tool: $(SIM_DIR)/obj/fake_tools.o $(SIM_DIR)/obj/sim.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_rel) $^ -o $@
$(SIM_DIR)/bin/simctl: $(SIM_DIR)/obj/simctl.o $(SIM_DIR)/obj/sim.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_rel) $^ -o $@
$(SIM_DIR)/bin/fake-nmxm: $(SIM_DIR)/obj/fake_nmxm.o $(SIM_DIR)/obj/sim.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_rel) $^ $(shell pkg-config --libs jansson openssl) -o $@
$(SIM_DIR)/bin/hostprobe: $(SIM_DIR)/obj/hostprobe.o $(BUILD)/rel/libnvl72.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_rel) $< $(BUILD)/rel/libnvl72.a $(LIBS) -o $@
# One program answers to each tool's name.
$(SIM_TOOLS): $(SIM_DIR)/bin/fake-host-tool
	ln -f $< $@

.PHONY: sim
sim: $(SIM_LIB) $(SIM_CLOCK) $(SIM_BINS)

CHECK_EXTRA += $(SIM_LIB) $(SIM_CLOCK) $(SIM_BINS)
