// Command postgres is a PostgreSQL-only program: it imports the PostgreSQL
// package of the SQL backend and nothing of its MySQL side, so its binary
// must link no MySQL driver. The import alone decides which modules are
// linked; the program starts a client on the in-memory backend so that it
// needs no database to run.
package main

import (
	"context"
	"fmt"
	"log"

	_ "github.com/simba-go/simba/backend-jdbc/postgres"
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
