package main

import (
	"strings"
	"testing"
)

// sqlBackends are the real backends with tables.
func sqlBackends() []struct {
	name     string
	variable string
	toURL    func(string) string
} {
	var out []struct {
		name     string
		variable string
		toURL    func(string) string
	}
	for _, be := range realBackends {
		if be.name == "postgres" || be.name == "mysql" {
			out = append(out, be)
		}
	}
	return out
}

// TestLeaseAboveBackendMaximumIsBadUsage: a --lease the SQL backends
// refuse (above 24h) is bad usage, reported at start, not a backend that
// never grants a session.
func TestLeaseAboveBackendMaximumIsBadUsage(t *testing.T) {
	for _, be := range sqlBackends() {
		t.Run(be.name, func(t *testing.T) {
			url := serverURL(t, be.variable, be.toURL)
			for _, args := range [][]string{
				{"status", "--backend", url, "--migrate", "--lease", "25h", "--timeout", "5s"},
				{"lock", "--backend", url, "--migrate", "--lease", "25h", "--timeout", "5s", "cli-lease-" + randomHex(t), "--", "true"},
				{"leader", "--backend", url, "--migrate", "--lease", "25h", "cli-lease-" + randomHex(t), "--", "true"},
			} {
				r := runSimba(t, args...)
				if r.code != exitUsage || !strings.Contains(r.stderr, "LeaseDuration") || !strings.Contains(r.stderr, "24h") {
					t.Errorf("%s --lease 25h: exit code %d, stderr %q; want %d and the backend's maximum", args[0], r.code, r.stderr, exitUsage)
				}
			}
		})
	}
}

// TestMissingTablesIsAConfigurationError: tables that were never created
// (no --migrate, a prefix nobody migrated) exit with EX_CONFIG, 78, and say
// how to create them, for every command that opens a client.
func TestMissingTablesIsAConfigurationError(t *testing.T) {
	for _, be := range sqlBackends() {
		t.Run(be.name, func(t *testing.T) {
			url := serverURL(t, be.variable, be.toURL)
			prefix := "simba_cli_nt" + randomHex(t) + "_"
			for _, args := range [][]string{
				{"status", "--backend", url, "--table-prefix", prefix, "--timeout", "5s"},
				{"lock", "--backend", url, "--table-prefix", prefix, "--timeout", "5s", "cli-nt", "--", "true"},
				{"leader", "--backend", url, "--table-prefix", prefix, "cli-nt", "--", "true"},
			} {
				r := runSimba(t, args...)
				if r.code != exitConfig || !strings.Contains(r.stderr, prefix+"session") || !strings.Contains(r.stderr, "--migrate") {
					t.Errorf("%s: exit code %d, stderr %q; want %d naming the missing tables and --migrate", args[0], r.code, r.stderr, exitConfig)
				}
				// One hint, in the command's terms: not the library's
				// Options.Migrate, and not twice.
				if strings.Count(r.stderr, "--migrate") != 1 || strings.Count(r.stderr, ".Schema") != 1 ||
					strings.Contains(r.stderr, "Options.Migrate") {
					t.Errorf("%s: stderr %q; want one hint naming --migrate and the schema script once each", args[0], r.stderr)
				}
			}
		})
	}
}

// TestTablePrefixIsForSQLOnly: --table-prefix on a backend without tables
// is bad usage, as is a prefix the SQL backends refuse.
func TestTablePrefixIsForSQLOnly(t *testing.T) {
	for _, args := range [][]string{
		{"status", "--backend", "memory://", "--table-prefix", "app_"},
		{"status", "--backend", "redis://127.0.0.1:1/0", "--table-prefix", "app_"},
		{"status", "--backend", "postgres://u@127.0.0.1:1/db", "--table-prefix", "bad-prefix"},
	} {
		r := runSimba(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "prefix") {
			t.Errorf("%v: exit code %d, stderr %q; want %d", args, r.code, r.stderr, exitUsage)
		}
	}
}

// TestEmptyTablePrefixIsBadUsage: an empty --table-prefix, as
// --table-prefix "$PREFIX" of an unset variable gives, is bad usage
// reported before the backend is contacted, never the default prefix,
// whose tables may be another application's.
func TestEmptyTablePrefixIsBadUsage(t *testing.T) {
	const url = "postgres://u@127.0.0.1:1/db?sslmode=disable"
	for _, args := range [][]string{
		{"status", "--backend", url, "--connect-timeout", "300ms", "--table-prefix", ""},
		{"status", "--backend", url, "--connect-timeout", "300ms", "--table-prefix="},
		{"lock", "--backend", url, "--connect-timeout", "300ms", "--table-prefix", "", "job", "--", "true"},
		{"leader", "--backend", url, "--connect-timeout", "300ms", "--table-prefix=", "job", "--", "true"},
	} {
		r := runSimba(t, args...)
		want := "simba " + args[0] + ": --table-prefix is empty"
		if r.code != exitUsage || !strings.Contains(r.stderr, want) || r.stdout != "" {
			t.Errorf("%q: exit code %d, stdout %q, stderr %q; want %d and %q", args, r.code, r.stdout, r.stderr, exitUsage, want)
		}
	}
}

// TestHelpListsConfigurationExitCode: every command that opens a client
// documents 78.
func TestHelpListsConfigurationExitCode(t *testing.T) {
	for _, cmd := range []string{"lock", "leader", "status"} {
		r := runSimba(t, cmd, "--help")
		for _, want := range []string{"78", "--migrate", "--table-prefix"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s --help does not mention %q:\n%s", cmd, want, r.stdout)
			}
		}
	}
}
