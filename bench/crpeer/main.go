// SPDX-License-Identifier: Apache-2.0
// The controller-runtime peer of the scale benchmark (bench/bench_scale.sh):
// a manager whose cache holds informers on the kinds the operator watches,
// as unstructured objects, the way a Go operator built on controller-runtime
// would cache them. With -strip-managed-fields the cache drops
// metadata.managedFields before storing (cache.TransformStripManagedFields),
// as the operator does. It prints "synced <ms>" once every informer has
// synced, then idles; on SIGTERM it prints the objects it holds and their
// compact JSON size ("cached <objects> <bytes>") and exits. The benchmark
// reads its RSS from /proc while it idles.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The kinds the operator's informers watch (src/operator/op.c), less
// UpgradeApprovals, which the benchmark never creates.
var kinds = []schema.GroupVersionKind{
	{Group: "nvl72.io", Version: "v1alpha1", Kind: "Rack"},
	{Group: "nvl72.io", Version: "v1alpha1", Kind: "ComputeTray"},
	{Group: "nvl72.io", Version: "v1alpha1", Kind: "ComputeDomain"},
	{Group: "nvl72.io", Version: "v1alpha1", Kind: "RackPartition"},
	{Group: "nvl72.io", Version: "v1alpha1", Kind: "RackUpgrade"},
	{Group: "nvl72.io", Version: "v1alpha1", Kind: "CompatibilityMatrix"},
	{Group: "", Version: "v1", Kind: "Node"},
	{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
}

func object(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// cachedBytes lists every kind from the cache without copying and sums the
// compact JSON of each object.
func cachedBytes(ctx context.Context, c cache.Cache) (objects, bytes int, err error) {
	for _, gvk := range kinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err = c.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return 0, 0, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for i := range l.Items {
			b, err := json.Marshal(l.Items[i].Object)
			if err != nil {
				return 0, 0, fmt.Errorf("marshal %s: %w", gvk.Kind, err)
			}
			objects++
			bytes += len(b)
		}
	}
	return objects, bytes, nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	leaseNS := flag.String("lease-namespace", "nvl72-system", "namespace of the agents' Leases")
	strip := flag.Bool("strip-managed-fields", false, "drop metadata.managedFields before caching")
	syncTimeout := flag.Duration("sync-timeout", 10*time.Minute, "give up when not synced by then")
	flag.Parse()
	log.SetLogger(logr.Discard())

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "crpeer: %v\n", err)
		os.Exit(1)
	}
	// The operator's own client is not rate limited on the client side.
	cfg.QPS, cfg.Burst = -1, 0
	opts := cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			object(kinds[7]): {Namespaces: map[string]cache.Config{*leaseNS: {}}},
		},
	}
	if *strip {
		opts.DefaultTransform = cache.TransformStripManagedFields()
	}
	mgr, err := manager.New(cfg, manager.Options{
		Cache:                  opts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "crpeer: %v\n", err)
		os.Exit(1)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	for _, gvk := range kinds {
		if _, err := mgr.GetCache().GetInformer(ctx, object(gvk)); err != nil {
			fmt.Fprintf(os.Stderr, "crpeer: informer %s: %v\n", gvk.Kind, err)
			os.Exit(1)
		}
	}
	t0 := time.Now()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	sctx, scancel := context.WithTimeout(ctx, *syncTimeout)
	synced := mgr.GetCache().WaitForCacheSync(sctx)
	scancel()
	if !synced {
		fmt.Fprintln(os.Stderr, "crpeer: caches did not sync")
		os.Exit(1)
	}
	fmt.Printf("synced %d\n", time.Since(t0).Milliseconds())
	<-ctx.Done()
	n, b, err := cachedBytes(context.Background(), mgr.GetCache())
	if err != nil {
		fmt.Fprintf(os.Stderr, "crpeer: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("cached %d %d\n", n, b)
	if err := <-done; err != nil {
		fmt.Fprintf(os.Stderr, "crpeer: %v\n", err)
		os.Exit(1)
	}
}
