// Command postgres is a PostgreSQL-only program: it imports the PostgreSQL
// package of the SQL backend and nothing of its MySQL side, so its binary
// must link no MySQL driver. The import alone decides which modules are
// linked: it registers the postgres:// scheme with core and links the
// package's driver, so the program needs no code of its own.
package main

import _ "github.com/simba-go/simba/backend-jdbc/postgres"

func main() {}
