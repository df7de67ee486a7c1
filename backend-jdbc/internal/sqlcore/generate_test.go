package sqlcore

import (
	"bytes"
	"flag"
	"go/format"
	"os"
	"path/filepath"
	"testing"
	"text/template"
)

var update = flag.Bool("update", false, "write the public packages' generated files (go generate)")

// A public package's parameters for templates/*.go.tmpl.
type publicPackage struct {
	Dir        string // its directory, from here
	Name       string // its name, the prefix of its errors
	PG         bool   // simbapg; else simbamysql
	Database   string // Config.Database
	Client     string // the name of the client New takes
	ClientType string
}

var publicPackages = []publicPackage{
	{Dir: "../../postgres", Name: "simbapg", PG: true, Database: "postgres", Client: "pool", ClientType: "*pgxpool.Pool"},
	{Dir: "../../mysql", Name: "simbamysql", Database: "mysql", Client: "db", ClientType: "*sql.DB"},
}

// TestGeneratedFiles checks that the public packages' files made from
// templates/ are what the templates give: one source for the API both
// packages share, with each package's own documentation, so that go doc
// shows every method of each. With -update (go generate) it writes them.
func TestGeneratedFiles(t *testing.T) {
	tmpls, err := filepath.Glob("templates/*.go.tmpl")
	if err != nil || len(tmpls) == 0 {
		t.Fatalf("templates: %v, %v", tmpls, err)
	}
	for _, tmpl := range tmpls {
		parsed := template.Must(template.ParseFiles(tmpl))
		for _, p := range publicPackages {
			var b bytes.Buffer
			b.WriteString("// Code generated from internal/sqlcore/" + filepath.ToSlash(tmpl) + " by go generate; DO NOT EDIT.\n\n")
			if err := parsed.Execute(&b, p); err != nil {
				t.Fatalf("%s for %s: %v", tmpl, p.Name, err)
			}
			src, err := format.Source(b.Bytes())
			if err != nil {
				t.Fatalf("%s for %s: %v\n%s", tmpl, p.Name, err, b.Bytes())
			}
			path := filepath.Join(p.Dir, filepath.Base(tmpl[:len(tmpl)-len(".tmpl")]))
			if *update {
				if err := os.WriteFile(path, src, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if had, err := os.ReadFile(path); err != nil || !bytes.Equal(had, src) {
				t.Errorf("%s is not what %s gives (%v): run go generate ./internal/sqlcore", path, tmpl, err)
			}
		}
	}
}
