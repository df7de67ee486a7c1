package main

import (
	"strings"
	"testing"
)

func TestPacketsReceived(t *testing.T) {
	n, err := packetsReceived("zk_version\t3.8.0\nzk_avg_latency\t0.1\nzk_packets_received\t12345\nzk_packets_sent\t12000\n")
	if err != nil || n != 12345 {
		t.Fatalf("got %d, %v; want 12345", n, err)
	}
	_, err = packetsReceived("mntr is not executed because it is not in the whitelist.\n")
	if err == nil || !strings.Contains(err.Error(), "whitelist") {
		t.Fatalf("a refused mntr: err %v, want one that names the whitelist", err)
	}
}
