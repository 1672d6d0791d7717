/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet's plugin messages as C structs, with their protobuf codecs:
 * the plugin-registration service and the DRA node service. The services
 * themselves (the kubelet plugin of imex.nvl72.io) are built on these. */
/* Contract: pure; one thread per message. Decoders fill caller storage
 * (zero it, or reuse it after _clear) and, on any error, leave it cleared
 * with the reason in e; the strings and arrays they fill belong to the
 * message and go with its _clear. A string that was absent is NULL (proto3
 * reads it as ""), and encoders write NULL and "" alike as absent. Every
 * string is valid UTF-8 of at most DRA_STR_MAX bytes and every repeated
 * field holds at most DRA_ITEMS_MAX entries (NV_E_TOO_LARGE past either).
 * Unknown fields are skipped; a field sent twice follows proto3 (the last
 * value wins, a map key sent twice keeps the last entry). Encoders append
 * to a capped buffer and return NV_E_TOO_LARGE when it is full. */
/* Field numbers and names follow the published .proto files of Kubernetes
 * 1.34 (module k8s.io/kubelet v0.34.4): pkg/apis/pluginregistration/v1/
 * api.proto (package "pluginregistration") and pkg/apis/dra/v1/api.proto
 * (package "k8s.io.kubelet.pkg.apis.dra.v1"; v1beta1 has the same
 * messages). */
#ifndef NVL72_DRA_H
#define NVL72_DRA_H

#include <stdbool.h>
#include <stddef.h>

#include "nvl72/buf.h"
#include "nvl72/err.h"
#include "nvl72/pb.h"

#define DRA_STR_MAX 4096
#define DRA_ITEMS_MAX 1024

/* The gRPC method paths of the two services. */
#define DRA_PATH_GET_INFO "/pluginregistration.Registration/GetInfo"
#define DRA_PATH_NOTIFY "/pluginregistration.Registration/NotifyRegistrationStatus"
#define DRA_PATH_PREPARE "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
#define DRA_PATH_UNPREPARE "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
#define DRA_PATH_PREPARE_V1BETA1                                                                   \
	"/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources"
#define DRA_PATH_UNPREPARE_V1BETA1                                                                 \
	"/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources"

/* pluginregistration.PluginInfo: type=1 ("DRAPlugin"), name=2 (the driver),
 * endpoint=3 (the DRA socket), supported_versions=4 ("v1.DRAPlugin", ...).
 * GetInfo's request, InfoRequest, has no fields. */
struct dra_plugin_info {
	char *type;
	char *name;
	char *endpoint;
	char **versions;
	size_t n_versions;
};

/* pluginregistration.RegistrationStatus: plugin_registered=1, error=2. Its
 * response, RegistrationStatusResponse, has no fields. */
struct dra_reg_status {
	bool registered;
	char *error;
};

/* dra.v1.Claim: namespace=1, uid=2, name=3. */
struct dra_claim {
	char *ns;
	char *uid;
	char *name;
};

/* NodePrepareResourcesRequest and NodeUnprepareResourcesRequest: both are
 * claims=1 (repeated Claim). */
struct dra_claims_req {
	struct dra_claim *claims;
	size_t n_claims;
};

/* dra.v1.Device: request_names=1, pool_name=2, device_name=3,
 * cdi_device_ids=4. */
struct dra_device {
	char **request_names;
	size_t n_request_names;
	char *pool_name;
	char *device_name;
	char **cdi_device_ids;
	size_t n_cdi_device_ids;
};

/* One value of NodePrepareResourcesResponse.claims (map<string, ...>=1,
 * keyed by the claim's UID): NodePrepareResourceResponse{devices=1,
 * error=2}. */
struct dra_prepare_result {
	char *uid;
	struct dra_device *devices;
	size_t n_devices;
	char *error;
};

struct dra_prepare_resp {
	struct dra_prepare_result *claims;
	size_t n_claims;
};

/* One value of NodeUnprepareResourcesResponse.claims (map keyed by UID):
 * NodeUnprepareResourceResponse{error=1}. */
struct dra_unprepare_result {
	char *uid;
	char *error;
};

struct dra_unprepare_resp {
	struct dra_unprepare_result *claims;
	size_t n_claims;
};

enum nv_err dra_plugin_info_decode(const void *data, size_t len, struct dra_plugin_info *out,
                                   struct pb_err *e);
enum nv_err dra_plugin_info_encode(const struct dra_plugin_info *m, struct buf *out);
void dra_plugin_info_clear(struct dra_plugin_info *m);

enum nv_err dra_reg_status_decode(const void *data, size_t len, struct dra_reg_status *out,
                                  struct pb_err *e);
enum nv_err dra_reg_status_encode(const struct dra_reg_status *m, struct buf *out);
void dra_reg_status_clear(struct dra_reg_status *m);

/* msg names the request type in errors ("NodePrepareResourcesRequest"). */
enum nv_err dra_claims_req_decode(const void *data, size_t len, const char *msg,
                                  struct dra_claims_req *out, struct pb_err *e);
enum nv_err dra_claims_req_encode(const struct dra_claims_req *m, struct buf *out);
void dra_claims_req_clear(struct dra_claims_req *m);

enum nv_err dra_prepare_resp_decode(const void *data, size_t len, struct dra_prepare_resp *out,
                                    struct pb_err *e);
enum nv_err dra_prepare_resp_encode(const struct dra_prepare_resp *m, struct buf *out);
void dra_prepare_resp_clear(struct dra_prepare_resp *m);

enum nv_err dra_unprepare_resp_decode(const void *data, size_t len, struct dra_unprepare_resp *out,
                                      struct pb_err *e);
enum nv_err dra_unprepare_resp_encode(const struct dra_unprepare_resp *m, struct buf *out);
void dra_unprepare_resp_clear(struct dra_unprepare_resp *m);

#endif
