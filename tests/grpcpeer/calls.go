// SPDX-License-Identifier: Apache-2.0

// One call against a real plugin (-call), for test scripts: register
// (GetInfo and NotifyRegistrationStatus, printing the endpoint), prepare
// and unprepare of the -claim flags (printing the response as one JSON
// line), and hostile, which sends the DRA socket what a broken or
// malicious client would (garbage, an oversized message, a cut message,
// a flood of streams) and checks that each is refused and that the plugin
// still answers afterwards ("ok - ..." lines).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type deviceOut struct {
	RequestNames []string `json:"requestNames"`
	PoolName     string   `json:"poolName"`
	DeviceName   string   `json:"deviceName"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs"`
}

type claimOut struct {
	Error   string      `json:"error"`
	Devices []deviceOut `json:"devices"`
}

func endpointOf(regPath string) string {
	conn := dial(regPath)
	defer conn.Close()
	ctx, cancel := withTimeout(time.Second)
	defer cancel()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpcpeer: GetInfo:", err)
		os.Exit(1)
	}
	return info.Endpoint
}

func draPath(version, method string) string {
	return "/k8s.io.kubelet.pkg.apis.dra." + version + ".DRAPlugin/" + method
}

func printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func runCall(call, regPath, driver, version string, claims claimList) int {
	switch call {
	case "register":
		fmt.Println(register(regPath, driver))
		if failed {
			return 1
		}
		return 0
	case "prepare", "unprepare":
		if version != "v1" && version != "v1beta1" {
			fmt.Fprintln(os.Stderr, "grpcpeer: -version is v1 or v1beta1")
			return 2
		}
		conn := dial(endpointOf(regPath))
		defer conn.Close()
		ctx, cancel := withTimeout(45 * time.Second)
		defer cancel()
		out := map[string]claimOut{}
		// The v1beta1 messages are the v1 ones on the wire.
		if call == "prepare" {
			resp := &drapb.NodePrepareResourcesResponse{}
			err := conn.Invoke(ctx, draPath(version, "NodePrepareResources"),
				&drapb.NodePrepareResourcesRequest{Claims: claims}, resp)
			if err != nil {
				fmt.Fprintln(os.Stderr, "grpcpeer: NodePrepareResources:", err)
				return 1
			}
			for uid, r := range resp.Claims {
				c := claimOut{Error: r.Error, Devices: []deviceOut{}}
				for _, d := range r.Devices {
					c.Devices = append(c.Devices, deviceOut{d.RequestNames, d.PoolName,
						d.DeviceName, d.CDIDeviceIDs})
				}
				out[uid] = c
			}
		} else {
			resp := &drapb.NodeUnprepareResourcesResponse{}
			err := conn.Invoke(ctx, draPath(version, "NodeUnprepareResources"),
				&drapb.NodeUnprepareResourcesRequest{Claims: claims}, resp)
			if err != nil {
				fmt.Fprintln(os.Stderr, "grpcpeer: NodeUnprepareResources:", err)
				return 1
			}
			for uid, r := range resp.Claims {
				out[uid] = claimOut{Error: r.Error, Devices: []deviceOut{}}
			}
		}
		printJSON(map[string]any{"claims": out})
		return 0
	case "hostile":
		attack(endpointOf(regPath))
		if failed {
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "grpcpeer: -call is register, prepare, unprepare or hostile")
	return 2
}

// ---- hostile clients, on raw HTTP/2 ----

type rawConn struct {
	c   net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

func rawDial(path string) (*rawConn, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	r := &rawConn{c: c}
	r.fr = http2.NewFramer(c, c)
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.enc = hpack.NewEncoder(&r.buf)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		c.Close()
		return nil, err
	}
	if err := r.fr.WriteSettings(); err != nil {
		c.Close()
		return nil, err
	}
	return r, nil
}

func (r *rawConn) headers(stream uint32, path string, end bool) error {
	r.buf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path},
		{":authority", "localhost"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream,
		BlockFragment: r.buf.Bytes(), EndHeaders: true, EndStream: end})
}

// Reads frames until one that ends the exchange: the stream's grpc-status
// (returned), a GOAWAY (its code) or the end of the connection.
func (r *rawConn) outcome(stream uint32) (grpcStatus string, goaway *http2.GoAwayFrame, closed bool) {
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			return "", nil, true
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == stream {
				if s := f.PseudoValue("status"); s != "" && s != "200" {
					return "http " + s, nil, false
				}
				for _, h := range f.RegularFields() {
					if h.Name == "grpc-status" {
						return h.Value, nil, false
					}
				}
			}
		case *http2.GoAwayFrame:
			return "", f, false
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = r.fr.WriteSettingsAck()
			}
		}
	}
}

func attack(dra string) {
	prep := draPath("v1", "NodePrepareResources")

	// Bytes that are not HTTP/2 at all: refused, connection closed.
	if c, err := net.DialTimeout("unix", dra, 5*time.Second); err == nil {
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\xff\xfe garbage "+
			strings.Repeat("\x17", 512))
		_, err = io.ReadAll(c)
		check(err == nil, "garbage on the DRA socket: the agent closes the connection", err)
		c.Close()
	} else {
		check(false, "dial the DRA socket", err)
	}

	// A length prefix past the message limit: RESOURCE_EXHAUSTED before
	// the body is held.
	if r, err := rawDial(dra); err == nil {
		_ = r.headers(1, prep, false)
		_ = r.fr.WriteData(1, true, []byte{0, 0x7f, 0xff, 0xff, 0xff})
		st, _, closed := r.outcome(1)
		check(st == "8", "an oversized message prefix (2 GiB) is RESOURCE_EXHAUSTED", st, " closed ", closed)
		r.c.Close()
	} else {
		check(false, "dial for the oversized message", err)
	}

	// A message cut short: 100 bytes announced, 10 sent, the stream ended.
	if r, err := rawDial(dra); err == nil {
		_ = r.headers(1, prep, false)
		msg := append([]byte{0, 0, 0, 0, 100}, bytes.Repeat([]byte{0x0a}, 10)...)
		_ = r.fr.WriteData(1, true, msg)
		st, _, closed := r.outcome(1)
		check(st == "13", "a truncated message is INTERNAL", st, " closed ", closed)
		r.c.Close()
	} else {
		check(false, "dial for the truncated message", err)
	}

	// A flood: 500 streams opened and reset at once (the rapid reset).
	if r, err := rawDial(dra); err == nil {
		var werr error
		for i := uint32(0); i < 500 && werr == nil; i++ {
			id := 2*i + 1
			if werr = r.headers(id, prep, false); werr == nil {
				werr = r.fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}
		}
		_, ga, closed := r.outcome(0)
		check(ga != nil && ga.ErrCode == http2.ErrCodeEnhanceYourCalm,
			"a flood of 500 reset streams gets GOAWAY ENHANCE_YOUR_CALM", ga, " closed ", closed, " ", werr)
		r.c.Close()
	} else {
		check(false, "dial for the flood", err)
	}

	// And the plugin still serves: a real call on a new connection.
	conn := dial(dra)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	resp, err := drapb.NewDRAPluginClient(conn).NodeUnprepareResources(ctx,
		&drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{
			{Namespace: "hostile", Name: "after", UID: "00000000-0000-4000-8000-00000000a11e"}}})
	ok := err == nil && resp.Claims["00000000-0000-4000-8000-00000000a11e"] != nil
	check(ok, "the agent still answers on its DRA socket after all of it", err, status.Code(err) == codes.OK)
}
