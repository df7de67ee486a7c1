// Command mysql is a MySQL-only program: it imports the MySQL package of
// the SQL backend and nothing of its PostgreSQL side, so its binary must
// link no pgx. The import alone decides which modules are linked; the
// program starts a client on the in-memory backend so that it needs no
// database to run.
package main

import (
	"context"
	"fmt"
	"log"

	_ "github.com/simba-go/simba/backend-jdbc/mysql"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

func main() {
	client, err := simba.New(memory.New().Connect())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(context.Background())
	fmt.Println("renew interval:", client.Config().RenewInterval)
}
