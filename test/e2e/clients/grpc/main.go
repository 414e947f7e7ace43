// A gRPC client for the e2e tests, built from google.golang.org/grpc: N unary calls of
// outrigger.v1.TestService/Unary over ONE ClientConn to TARGET, then a JSON summary (calls by the
// serving endpoint's address, failures). Explicit mode: grpc-go dials through HTTPS_PROXY with
// CONNECT. Messages are encoded by hand (field 1 text, field 7 served_by) to need no generated code.
// usage: grpc-client TARGET N (test/e2e/grpc.test.ts builds it)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// servedBy reads field 7 (string) of a Msg.
func servedBy(b []byte) string {
	for i := 0; i < len(b); {
		key := b[i]
		i++
		if key&7 == 2 {
			n, w := 0, 0
			for shift := 0; ; shift += 7 {
				c := b[i+w]
				n |= int(c&0x7f) << shift
				w++
				if c < 0x80 {
					break
				}
			}
			i += w
			if key>>3 == 7 {
				return string(b[i : i+n])
			}
			i += n
		} else { // varint
			for b[i] >= 0x80 {
				i++
			}
			i++
		}
	}
	return ""
}

func main() {
	n, _ := strconv.Atoi(os.Args[2])
	conn, err := grpc.NewClient(os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close()
	byServer := map[string]int{}
	var failures []string
	for i := 0; i < n; i++ {
		text := []byte("go" + strconv.Itoa(i))
		req := append([]byte{0x0a, byte(len(text))}, text...)
		var resp []byte
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := conn.Invoke(ctx, "/outrigger.v1.TestService/Unary", &req, &resp)
		cancel()
		if err != nil {
			failures = append(failures, status.Convert(err).String())
			continue
		}
		byServer[servedBy(resp)]++
	}
	out, _ := json.Marshal(map[string]any{"total": n, "failed": len(failures), "failures": failures, "byServer": byServer})
	fmt.Println(string(out))
}
