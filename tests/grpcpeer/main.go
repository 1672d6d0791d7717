// SPDX-License-Identifier: Apache-2.0

// Command grpcpeer calls a kubelet plugin's two gRPC services the way the
// kubelet does, with the kubelet's own generated clients (k8s.io/kubelet
// v0.34.4) on google.golang.org/grpc: GetInfo and NotifyRegistrationStatus
// on the registration socket, then NodePrepareResources and
// NodeUnprepareResources on the endpoint GetInfo names. It prints one
// "ok - ..." or "not ok - ..." line per check and exits 1 when one failed.
//
// The plugin under test answers as tests/integration/test_grpc_peer.c's
// handlers do: one device per claim named after its UID, a claim UID
// "fail" refused with FAILED_PRECONDITION and a fixed message. With -call
// it makes one call against a real plugin instead (calls.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

var failed bool

func check(ok bool, what string, detail ...any) {
	if ok {
		fmt.Printf("ok - %s\n", what)
		return
	}
	failed = true
	fmt.Printf("not ok - %s: %s\n", what, fmt.Sprint(detail...))
}

func dial(path string) *grpc.ClientConn {
	conn, err := grpc.NewClient("unix:"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Printf("not ok - dial %s: %v\n", path, err)
		os.Exit(1)
	}
	return conn
}

// The kubelet's timeouts: GetInfo 1 s, the notification 5 s, DRA calls 45 s.
func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func register(path, driver string) string {
	conn := dial(path)
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	ctx, cancel := withTimeout(time.Second)
	defer cancel()
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		check(false, "GetInfo", err)
		os.Exit(1)
	}
	check(info.Type == "DRAPlugin", "GetInfo: type is DRAPlugin", info.Type)
	check(info.Name == driver, "GetInfo: name is the driver", info.Name)
	check(strings.Join(info.SupportedVersions, ",") == "v1.DRAPlugin,v1beta1.DRAPlugin",
		"GetInfo: supported versions", info.SupportedVersions)
	ctx5, cancel5 := withTimeout(5 * time.Second)
	defer cancel5()
	_, err = reg.NotifyRegistrationStatus(ctx5, &registerapi.RegistrationStatus{PluginRegistered: true})
	check(err == nil, "NotifyRegistrationStatus", err)
	return info.Endpoint
}

func prepare(dra drapb.DRAPluginClient) {
	ctx, cancel := withTimeout(45 * time.Second)
	defer cancel()
	req := &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{
		{Namespace: "team-a", UID: "uid-1", Name: "channel"},
		{Namespace: "team-a", UID: "uid-2", Name: "channel-b"},
	}}
	resp, err := dra.NodePrepareResources(ctx, req)
	if err != nil {
		check(false, "NodePrepareResources", err)
		return
	}
	check(len(resp.Claims) == 2, "NodePrepareResources: a result per claim", resp.Claims)
	r := resp.Claims["uid-2"]
	ok := r != nil && r.Error == "" && len(r.Devices) == 1 && r.Devices[0].DeviceName == "uid-2" &&
		r.Devices[0].PoolName == "node-a" &&
		strings.Join(r.Devices[0].RequestNames, ",") == "channel" &&
		strings.Join(r.Devices[0].CDIDeviceIDs, ",") == "imex.nvl72.io/channel=uid-2"
	check(ok, "NodePrepareResources: the device of uid-2", r)
}

func unprepare(dra drapb.DRAPluginClient) {
	ctx, cancel := withTimeout(45 * time.Second)
	defer cancel()
	resp, err := dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "team-a", UID: "uid-1", Name: "channel"}}})
	check(err == nil && resp.Claims["uid-1"] != nil && resp.Claims["uid-1"].Error == "",
		"NodeUnprepareResources", err, resp)
	_, err = dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "team-a", UID: "fail", Name: "x"}}})
	st := status.Convert(err)
	check(st.Code() == codes.FailedPrecondition && st.Message() == "100% not ready: tray \u00e9",
		"a refusal reaches the client with its code and message", err)
}

func hostile(conn *grpc.ClientConn, dra drapb.DRAPluginClient) {
	ctx, cancel := withTimeout(45 * time.Second)
	defer cancel()
	err := conn.Invoke(ctx, "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeFrobnicate",
		&drapb.NodePrepareResourcesRequest{}, &drapb.NodePrepareResourcesResponse{})
	check(status.Code(err) == codes.Unimplemented, "an unknown method is UNIMPLEMENTED", err)
	big := strings.Repeat("n", 5<<20)
	_, err = dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "team-a", UID: "uid-9", Name: big}}})
	check(status.Code(err) == codes.ResourceExhausted, "a 5 MiB request is RESOURCE_EXHAUSTED", err)
}

// More calls at once than the server's stream limit: grpc-go queues past
// SETTINGS_MAX_CONCURRENT_STREAMS, so every call must still succeed.
func concurrent(dra drapb.DRAPluginClient) {
	ctx, cancel := withTimeout(45 * time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			uid := fmt.Sprintf("uid-c%d", i)
			resp, err := dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{
				Claims: []*drapb.Claim{{Namespace: "team-a", UID: uid, Name: "c"}}})
			if err == nil && (resp.Claims[uid] == nil || len(resp.Claims[uid].Devices) != 1) {
				err = fmt.Errorf("bad answer for %s: %v", uid, resp)
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	bad := 0
	var first error
	for err := range errs {
		if err != nil {
			bad++
			if first == nil {
				first = err
			}
		}
	}
	check(bad == 0, "64 concurrent prepares on one connection", bad, " failed, first: ", first)
}

// claimList collects -claim NAMESPACE/NAME/UID flags.
type claimList []*drapb.Claim

func (c *claimList) String() string { return fmt.Sprint(len(*c), " claims") }

func (c *claimList) Set(v string) error {
	parts := strings.SplitN(v, "/", 3)
	if len(parts) != 3 {
		return fmt.Errorf("want NAMESPACE/NAME/UID, got %q", v)
	}
	*c = append(*c, &drapb.Claim{Namespace: parts[0], Name: parts[1], UID: parts[2]})
	return nil
}

func main() {
	regPath := flag.String("reg", "", "the plugin's registration socket")
	driver := flag.String("driver", "imex.nvl72.io", "the driver name GetInfo must report")
	call := flag.String("call", "", "one call against a real plugin instead of the self-test: "+
		"register, prepare, unprepare or hostile (see calls.go)")
	version := flag.String("version", "v1", "the DRA service version of -call prepare/unprepare: v1 or v1beta1")
	var claims claimList
	flag.Var(&claims, "claim", "NAMESPACE/NAME/UID of a claim for -call prepare/unprepare (repeatable)")
	flag.Parse()
	if *regPath == "" {
		fmt.Fprintln(os.Stderr, "usage: grpcpeer -reg SOCKET [-driver NAME] [-call CALL [-claim NS/NAME/UID]...]")
		os.Exit(2)
	}
	if *call != "" {
		os.Exit(runCall(*call, *regPath, *driver, *version, claims))
	}
	endpoint := register(*regPath, *driver)
	conn := dial(endpoint)
	defer conn.Close()
	dra := drapb.NewDRAPluginClient(conn)
	prepare(dra)
	unprepare(dra)
	hostile(conn, dra)
	concurrent(dra)
	prepare(dra) // the connection still serves after all of it
	if failed {
		os.Exit(1)
	}
}
