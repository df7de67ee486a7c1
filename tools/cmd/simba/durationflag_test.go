package main

import (
	"regexp"
	"strings"
	"testing"
)

// durationFlag is a flag of a help whose value is a duration.
var durationFlag = regexp.MustCompile(`(?m)^  --([a-z-]+) duration `)

// TestBadDurationSaysADurationIsWanted: a value that is no duration, for
// every duration flag of every command, is bad usage that says a duration
// such as 30s is wanted, rather than "parse error".
func TestBadDurationSaysADurationIsWanted(t *testing.T) {
	seen := 0
	for _, c := range commands {
		help := runSimba(t, c.name, "--help").stdout
		for _, m := range durationFlag.FindAllStringSubmatch(help, -1) {
			seen++
			r := runSimba(t, c.name, "--"+m[1], "abc")
			want := `simba ` + c.name + `: invalid value "abc" for flag --` + m[1] + `: want a duration such as 30s, 500ms or 1m30s`
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s --%s abc: exit code %d, stderr %q; want %d and %q", c.name, m[1], r.code, r.stderr, exitUsage, want)
			}
		}
	}
	if seen < 5 {
		t.Fatalf("%d duration flags found in the helps", seen)
	}
}
