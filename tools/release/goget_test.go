package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const versionM = `/tmp/x/redis: go1.26.8
	path	example.com/goget/redis
	mod	example.com/goget/redis	(devel)	
	dep	github.com/redis/go-redis/v9	v9.22.0	h1:laDv=
	dep	github.com/simba-go/simba/backend-redis	v0.1.0	h1:v8DW=
	dep	github.com/simba-go/simba/core	v0.1.0
	=>	../core	(devel)	
	build	-buildmode=exe
`

func TestParseVersionM(t *testing.T) {
	got := parseVersionM(versionM)
	want := map[string]string{
		"github.com/redis/go-redis/v9":            "v9.22.0",
		"github.com/simba-go/simba/backend-redis": "v0.1.0",
		"github.com/simba-go/simba/core":          "v0.1.0 => ../core (devel)",
	}
	if len(got) != len(want) {
		t.Fatalf("parseVersionM = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parseVersionM[%s] = %q, want %q", k, got[k], v)
		}
	}
}

func TestCheckLinked(t *testing.T) {
	const mod = "github.com/simba-go/simba/backend-redis"
	base := map[string]string{mod: "v0.1.0", modRedis: "v9.22.0"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		m[k] = v
		return m
	}
	tests := []struct {
		name    string
		give    map[string]string
		wantErr string
	}{
		{name: "only its driver", give: base},
		{name: "another driver", give: with(modPgx, "v5.12.0"), wantErr: "links github.com/jackc/pgx/v5 v5.12.0"},
		{name: "a replaced module", give: with("github.com/simba-go/simba/core", "v0.1.0 => ../core (devel)"), wantErr: "replaced"},
		{name: "the module at another version", give: with(mod, "v0.0.9"), wantErr: "linked at v0.0.9"},
		{name: "its driver missing", give: map[string]string{mod: "v0.1.0"}, wantErr: "does not link " + modRedis},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkLinked(tt.give, mod, "v0.1.0", []string{modRedis}, []string{modPgx, modMySQL, modZooKeeper})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("checkLinked = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("checkLinked = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// Every program of the table has its directory in testdata/goget, and every
// directory there is in the table.
func TestProgramsMatchTestdata(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "goget"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() {
			dirs[e.Name()] = true
		}
	}
	for _, p := range programs {
		if !dirs[p.name] {
			t.Errorf("program %s has no directory testdata/goget/%s", p.name, p.name)
		}
		if !hasGoPackage(filepath.Join("testdata", "goget", p.name)) {
			t.Errorf("testdata/goget/%s holds no Go file", p.name)
		}
		delete(dirs, p.name)
	}
	for d := range dirs {
		t.Errorf("testdata/goget/%s is not in the programs table", d)
	}
}

func TestShort(t *testing.T) {
	got := strings.Join(short([]string{modRedis, modEdwards, modMySQL, "local"}), ",")
	want := "redis/go-redis/v9,edwards25519,go-sql-driver/mysql,local"
	if got != want {
		t.Errorf("short = %s, want %s", got, want)
	}
}
