// Command fxsimba runs leader work in an uber-go/fx application. The
// backend is the in-memory one of core, so the binary links no driver.
package main

import (
	"context"
	"fmt"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	"github.com/simba-go/simba/fxsimba"
	"go.uber.org/fx"
)

func main() {
	fx.New(
		fx.Provide(func() simba.Backend { return memory.New().Connect() }),
		fxsimba.Options,
		fxsimba.AsLeaderWork("report", func(ctx context.Context, t *simba.Term) error {
			fmt.Println("leading report with fencing token", t.Token())
			<-ctx.Done()
			return nil
		}),
	).Run()
}
