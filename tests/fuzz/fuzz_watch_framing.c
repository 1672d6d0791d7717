// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for watch stream framing: the input is cut into chunks
// at positions taken from its first bytes and fed to the framer, and every
// value that comes out goes through the event decoder, as kube_watch does.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/kube/kube_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_framer f;
	struct jx_err e;
	size_t off = 0, step = size > 0 ? (size_t)(data[0] % 64) + 1 : 1;

	kube_framer_init(&f, 4096);
	while (off < size) {
		size_t n = size - off < step ? size - off : step;
		json_t *v = NULL;
		enum nv_err rc = kube_framer_feed(&f, (const char *)data + off, n);
		off += n;
		while (rc == NV_OK && (rc = kube_framer_next(&f, &v, &e)) == NV_OK) {
			enum kube_event_type t;
			json_t *obj = NULL;
			if (kube_watch_event_decode(v, &t, &obj, &e) == NV_OK)
				(void)kube_obj_rv(obj);
			json_decref(v);
		}
		if (rc != NV_OK && rc != NV_E_NOT_FOUND)
			break; /* kube_watch ends the stream here */
	}
	(void)kube_framer_partial(&f);
	kube_framer_clear(&f);
	return 0;
}
