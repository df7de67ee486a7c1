package main

import (
	"regexp"
	"slices"
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
	line := regexp.MustCompile(`^ *\+\d+\.\d\ds  (node-[1234]|--) +\S`)
	story := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "+") {
			story++
			if !line.MatchString(l) {
				t.Errorf("story line without time offset and node: %q", l)
			}
		}
	}
	if story < 25 {
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
	checkGroupStory(t, out)
}

// checkGroupStory checks the partition group part: every spread line
// gives each partition at most one holder, and the group settles three
// times (3 nodes, 4 nodes, 3 nodes again without the one that left) with
// every partition held and the shares within one.
func checkGroupStory(t *testing.T, out string) {
	t.Helper()
	// "takes partition 4", not "takes 4 partitions": the number is the
	// partition's, and the spread follows "now:".
	move := regexp.MustCompile(`^ *\+\d+\.\d\ds  (node-\d)  (takes|releases) partition (\d) +now: (.*)$`)
	var last map[string][]int // the spread of the last move line
	var settled []map[string][]int
	moves := 0
	for _, l := range strings.Split(out, "\n") {
		if m := move.FindStringSubmatch(l); m != nil {
			moves++
			last = parseSpread(t, m[4])
			p := atoi(t, m[3])
			holds := slices.Contains(last[m[1]], p)
			if m[2] == "takes" && !holds || m[2] == "releases" && holds {
				t.Errorf("%q: the spread does not show the move", l)
			}
			continue
		}
		if strings.Contains(l, "--      settled: ") {
			if last == nil {
				t.Fatalf("settled before any partition moved:\n%s", out)
			}
			settled = append(settled, last)
		}
	}
	if moves < 10 {
		t.Errorf("only %d partition moves:\n%s", moves, out)
	}
	if len(settled) != 3 {
		t.Fatalf("%d settled spreads, want 3:\n%s", len(settled), out)
	}
	for i, want := range []int{3, 4, 3} {
		s := settled[i]
		if len(s["free"]) > 0 {
			t.Errorf("settled spread %d leaves partitions %v free", i+1, s["free"])
		}
		delete(s, "free")
		lo, hi := demoPartitions, 0
		for _, parts := range s {
			lo, hi = min(lo, len(parts)), max(hi, len(parts))
		}
		if len(s) != want || hi-lo > 1 {
			t.Errorf("settled spread %d is %v: want %d nodes with shares within one", i+1, s, want)
		}
	}
	if _, ok := settled[1]["node-4"]; !ok {
		t.Errorf("node-4 has no share after it joined: %v", settled[1])
	}
	leaver := regexp.MustCompile(`--      (node-\d) leaves: `).FindStringSubmatch(out)
	if leaver == nil {
		t.Fatalf("no node leaves:\n%s", out)
	}
	if _, ok := settled[2][leaver[1]]; ok || len(settled[1][leaver[1]]) == 0 {
		t.Errorf("%s left, but the spreads are %v then %v", leaver[1], settled[1], settled[2])
	}
	if !strings.Contains(out, "node-4  session opened\n") {
		t.Errorf("node-4 did not start:\n%s", out)
	}
	if strings.Count(out, "\n    node-1 [") < 2 || !strings.Contains(out, `partition group "demo-partitions": `) {
		t.Errorf("the summary lacks the settled spreads:\n%s", out)
	}
}

// parseSpread reads "node-1 [0 1] node-2 [] free [2]" into a map from the
// node (or "free") to its partitions, and fails the test unless every
// partition appears exactly once.
func parseSpread(t *testing.T, s string) map[string][]int {
	t.Helper()
	spread := map[string][]int{}
	seen := make([]int, demoPartitions)
	for _, m := range regexp.MustCompile(`(node-\d|free) \[([\d ]*)\]`).FindAllStringSubmatch(s, -1) {
		spread[m[1]] = []int{}
		for _, f := range strings.Fields(m[2]) {
			p := atoi(t, f)
			if p < 0 || p >= demoPartitions {
				t.Fatalf("partition %d in %q", p, s)
			}
			seen[p]++
			spread[m[1]] = append(spread[m[1]], p)
		}
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("partition %d appears %d times in %q", p, n, s)
		}
	}
	return spread
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
