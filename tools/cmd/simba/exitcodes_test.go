package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeExitCodes returns the codes of the table under "## Exit codes" in
// README.md: "the command's" for the row of the command's own code, and
// each number of the other rows.
func readmeExitCodes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Exit codes\n")
	if !ok {
		t.Fatal("README.md has no section Exit codes")
	}
	var codes []string
	for line := range strings.SplitSeq(section, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| ") || strings.TrimSpace(cells[1]) == "Code" {
			continue
		}
		for code := range strings.SplitSeq(cells[1], ",") {
			codes = append(codes, strings.TrimSpace(code))
		}
	}
	return codes
}

// helpCode is the first column of a line of the exit codes of a help.
var helpCode = regexp.MustCompile(`^  (the command's|[0-9]+) `)

// helpExitCodes returns the codes the help of cmd lists under "Exit codes:".
func helpExitCodes(t *testing.T, cmd string) []string {
	t.Helper()
	r := runSimba(t, cmd, "--help")
	_, section, ok := strings.Cut(r.stdout, "\nExit codes:\n")
	if !ok {
		t.Fatalf("simba %s --help lists no exit codes:\n%s", cmd, r.stdout)
	}
	var codes []string
	for line := range strings.SplitSeq(section, "\n") {
		if line == "" {
			break
		}
		if m := helpCode.FindStringSubmatch(line); m != nil {
			codes = append(codes, m[1])
		}
	}
	return codes
}

// TestHelpExitCodesAgreeWithTheReadme: the help of lock, leader and status
// lists every code of the README's table that the command can exit with
// (1 and the signal codes included), and none that the table lacks.
func TestHelpExitCodesAgreeWithTheReadme(t *testing.T) {
	readme := readmeExitCodes(t)
	if !slices.Contains(readme, "143") || !slices.Contains(readme, "1") {
		t.Fatalf("the README's table was not read: %q", readme)
	}
	// The codes of the table that a command never exits with.
	notUsed := map[string][]string{
		"lock":   nil,
		"leader": {"75", "76"},                                // lock only
		"status": {"the command's", "75", "76", "126", "127"}, // it runs no command
	}
	for cmd, skip := range notUsed {
		help := helpExitCodes(t, cmd)
		for _, code := range readme {
			if code == "0" && cmd != "status" {
				continue // lock and leader: the command's own code
			}
			if !slices.Contains(skip, code) && !slices.Contains(help, code) {
				t.Errorf("simba %s --help does not list the exit code %s of the README", cmd, code)
			}
		}
		for _, code := range help {
			if !slices.Contains(readme, code) {
				t.Errorf("simba %s --help lists the exit code %s, which the README's table lacks", cmd, code)
			}
			if slices.Contains(skip, code) {
				t.Errorf("simba %s --help lists the exit code %s, which it never exits with", cmd, code)
			}
		}
	}
}
