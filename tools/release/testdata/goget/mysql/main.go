// Command mysql is a MySQL-only program: it imports the MySQL package of
// the SQL backend and nothing of its PostgreSQL side, so its binary must
// link no pgx. The import alone decides which modules are linked: it
// registers the mysql:// scheme with core and links the package's driver,
// so the program needs no code of its own.
package main

import _ "github.com/simba-go/simba/backend-jdbc/mysql"

func main() {}
