// Command metrics serves the Prometheus metrics and the JSON snapshot of a
// node on the in-memory backend of core, so the binary links no driver.
package main

import (
	"context"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	simbametrics "github.com/simba-go/simba/metrics"
)

func main() {
	if err := serve(); err != nil {
		log.Fatal(err)
	}
}

// serve returns when the server fails, after closing the client, which
// log.Fatal in its place would skip.
func serve() error {
	col, err := simbametrics.New()
	if err != nil {
		return err
	}
	client, err := simba.New(memory.New().Connect(), simba.WithEventListener(col.Observe))
	if err != nil {
		return err
	}
	defer func() { _ = client.Close(context.Background()) }()
	col.Attach(client)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	http.Handle("/simba", simbametrics.SnapshotHandler(client))
	return http.ListenAndServe("127.0.0.1:9464", nil)
}
