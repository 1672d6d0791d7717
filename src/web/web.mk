# SPDX-License-Identifier: Apache-2.0
# The dashboard's files are compiled into the library: a small host tool
# turns src/web/assets/* into $(BUILD)/gen/web_assets.c, whose object joins
# libnvl72.a in every variant and the fuzz targets' link.

WEB_ASSETS    := $(sort $(wildcard src/web/assets/*))
WEB_EMBED     := $(BUILD)/tools/web_embed
WEB_ASSETS_C  := $(BUILD)/gen/web_assets.c
WEB_GENFLAGS  := -Isrc/web

$(WEB_EMBED): src/web/tools/web_embed.c
	@mkdir -p $(@D)
	$(CC) $(filter-out -MMD -MP,$(BASEFLAGS)) -O1 $< -o $@

$(WEB_ASSETS_C): $(WEB_EMBED) $(WEB_ASSETS) src/web/web.mk
	@mkdir -p $(@D)
	$(WEB_EMBED) $@ $(WEB_ASSETS)

define WEB_ASSETS_VARIANT
$(BUILD)/$(1)/obj/gen/web_assets.o: $(WEB_ASSETS_C) src/web/web_assets.h
	@mkdir -p $$(@D)
	$$(CC) $$(filter-out -MMD -MP,$$(BASEFLAGS)) $$(CFLAGS_$(1)) $(WEB_GENFLAGS) -c $$< -o $$@

$(BUILD)/$(1)/libnvl72.a: $(BUILD)/$(1)/obj/gen/web_assets.o
endef
$(foreach v,rel test asan,$(eval $(call WEB_ASSETS_VARIANT,$(v))))

$(BUILD)/fuzz/obj/gen/web_assets.o: $(WEB_ASSETS_C) src/web/web_assets.h
	@mkdir -p $(@D)
	$(FUZZCC) $(filter-out -MMD -MP,$(FUZZFLAGS)) $(WEB_GENFLAGS) -c $< -o $@

ifneq ($(FUZZ_BINS),)
$(FUZZ_BINS): $(BUILD)/fuzz/obj/gen/web_assets.o
endif
