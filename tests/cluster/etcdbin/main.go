// SPDX-License-Identifier: Apache-2.0
// Test-only entry point: the upstream etcd server for the test control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
