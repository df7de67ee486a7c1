package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDemoTellsTheStory(t *testing.T) {
	begin := time.Now()
	r := runSimba(t, "demo", "--duration", "5s", "--lease", "500ms")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit code %d, stderr %q; output:\n%s", r.code, r.stderr, r.stdout)
	}
	if elapsed := time.Since(begin); elapsed < 5*time.Second || elapsed > 30*time.Second {
		t.Errorf("the demo took %v for --duration 5s", elapsed)
	}
	out := r.stdout

	// Every line of the story has a time offset and a node.
	line := regexp.MustCompile(`^ *\+\d+\.\d\ds  (node-[123]|--) +\S`)
	story := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "+") {
			story++
			if !line.MatchString(l) {
				t.Errorf("story line without time offset and node: %q", l)
			}
		}
	}
	if story < 15 {
		t.Errorf("only %d story lines", story)
	}

	// The paused leader's term ends on its own clock.
	deadline := regexp.MustCompile(`(node-\d)  term with token (\d+) ended: DEADLINE_PASSED`).FindStringSubmatch(out)
	if deadline == nil {
		t.Fatalf("no term ended with DEADLINE_PASSED:\n%s", out)
	}
	paused, oldToken := deadline[1], deadline[2]

	// Another node takes over with a higher token.
	failover := regexp.MustCompile(`failover: (node-\d) leads with token (\d+), higher than the paused (node-\d)'s token (\d+)`).FindStringSubmatch(out)
	if failover == nil {
		t.Fatalf("no failover line:\n%s", out)
	}
	if failover[1] == paused || failover[3] != paused || failover[4] != oldToken || atoi(t, failover[2]) <= atoi(t, oldToken) {
		t.Errorf("failover %q does not follow the pause of %s with token %s", failover[0], paused, oldToken)
	}

	// The late write of the paused node is refused.
	stale := paused + "  writes to the resource with token " + oldToken + ": REJECTED, stale token"
	if !strings.Contains(out, stale) {
		t.Errorf("no %q:\n%s", stale, out)
	}
	for _, want := range []string{
		paused + " pauses: its connection stalls",
		paused + " is back as a candidate",
		"handover: node-",
		"resource: ",
		"1 refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "DEADLINE_PASSED"), strings.Index(out, "failover:"); i > j {
		t.Errorf("failover told before the deadline passed:\n%s", out)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
