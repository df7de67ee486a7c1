package internal

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const module = "github.com/simba-go/simba/backend-jdbc"

// TestEachPackageLinksOnlyItsDriver: a program that imports one backend of
// this module links that backend's driver and no other, and the engine
// links none.
func TestEachPackageLinksOnlyItsDriver(t *testing.T) {
	const pgx, mysql, mysqlDep = "github.com/jackc/pgx/", "github.com/go-sql-driver/mysql", "filippo.io/edwards25519"
	tests := []struct {
		pkg       string
		want      string   // a dependency it must have
		forbidden []string // prefixes of dependencies it must not have
	}{
		{pkg: module + "/postgres", want: pgx + "v5/pgxpool", forbidden: []string{mysql, mysqlDep}},
		{pkg: module + "/mysql", want: mysql, forbidden: []string{pgx, "github.com/jackc/"}},
		{pkg: module + "/internal/sqlcore", forbidden: []string{pgx, "github.com/jackc/", mysql, mysqlDep}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.pkg, module+"/"), func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tt.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", tt.pkg, err, out)
			}
			deps := strings.Fields(string(out))
			found := tt.want == ""
			for _, d := range deps {
				found = found || d == tt.want
				for _, f := range tt.forbidden {
					if strings.HasPrefix(d, f) {
						t.Errorf("%s links %s", tt.pkg, d)
					}
				}
			}
			if !found {
				t.Errorf("%s does not link %s: the check looks at the wrong list", tt.pkg, tt.want)
			}
		})
	}
}

// Code that serves both databases converts one package's Options and
// FenceTable into the other's, and holds either package's *Fence behind one
// interface: their SQLHandle is one type.
var (
	_ = simbamysql.Options(simbapg.Options{})
	_ = simbamysql.FenceTable(simbapg.FenceTable{})
	_ = []interface {
		Init(ctx context.Context, db simbapg.SQLHandle, key any) error
		Write(ctx context.Context, db simbapg.SQLHandle, key any, token uint64, values ...any) (bool, error)
	}{(*simbapg.Fence)(nil), (*simbamysql.Fence)(nil)}
)
