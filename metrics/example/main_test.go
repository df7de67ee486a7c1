package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// runMain makes the test binary run the example's main instead of the
// tests, so that a test can start the example as a process of its own.
const runMain = "SIMBA_METRICS_EXAMPLE_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestSIGTERMStopsTheNode: SIGTERM, what Kubernetes sends to stop a pod,
// stops the example as an interrupt does: it closes its client, which
// releases its leases, and exits with status 0 instead of being killed
// (status 143) with its leases held.
func TestSIGTERMStopsTheNode(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-listen", "127.0.0.1:0", "-duration", "1m")
	cmd.Env = append(os.Environ(), runMain+"=1")
	cmd.Stderr = io.Discard
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "serving http://") {
		t.Fatalf("first line %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v, want exit status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the example did not stop within 20s of SIGTERM")
	}
}

// TestRun serves the node, scrapes both endpoints until the node leads
// "report" and a worker waited for "invoice", then stops it.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, settings{listen: "127.0.0.1:0", duration: time.Minute}, io.Discard, func(a net.Addr) { addrs <- a })
	}()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatal(err)
	}

	wants := []string{
		`simba_session_status{status="LIVE"} 1`,
		`simba_terms_won_total{kind="election",lease="report"} 1`,
		`simba_group_partitions_held{group="jobs"} 4`,
		`simba_lock_acquire_wait_seconds_count{lease="*"} `,
		`simba_lock_acquire_wait_seconds_bucket{lease="*",le="0.5"} `,
		`go_goroutines `,
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		body := get(t, base+"/metrics")
		missing := ""
		for _, w := range wants {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" && strings.Contains(body, `simba_terms_ended_total{kind="lock",lease="*",reason="STOPPED"} `) &&
			!strings.Contains(body, `simba_terms_ended_total{kind="lock",lease="*",reason="STOPPED"} 0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics never showed %q:\n%s", missing, body)
		}
		time.Sleep(50 * time.Millisecond)
	}

	var doc struct {
		Session struct {
			Identity string `json:"identity"`
			Status   string `json:"status"`
		} `json:"session"`
		Groups []struct {
			Name string `json:"name"`
			Held []int  `json:"held"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(get(t, base+"/simba")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Session.Identity != "example" || doc.Session.Status != "LIVE" || len(doc.Groups) != 1 || len(doc.Groups[0].Held) != 4 {
		t.Errorf("/simba: %+v", doc)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRunBoundsDuration(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, 25 * time.Hour} {
		err := run(t.Context(), settings{listen: "127.0.0.1:0", duration: d}, io.Discard, func(net.Addr) {})
		if err == nil || !strings.Contains(err.Error(), "-duration") {
			t.Errorf("duration %v: %v", d, err)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, res.Status, err)
	}
	return string(body)
}
