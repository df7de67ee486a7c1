package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

const chartLines = `bench backend=memory impl=simba op=acquire_release ops_s=200000 p50_us=4.4 p99_us=22
bench backend=memory impl=floor op=acquire_release ops_s=1000000 p50_us=0.68 p99_us=0.91
bench backend=redis impl=simba op=acquire_release ops_s=12000 p50_us=52 p99_us=466
bench backend=redis impl=simba_async op=acquire_release ops_s=36000 p50_us=20 p99_us=100
bench backend=redis impl=spi op=acquire_release ops_s=15000 p50_us=44 p99_us=400
bench backend=redis impl=redislock op=acquire_release ops_s=24000 p50_us=30 p99_us=194
bench backend=redis impl=simba op=keepalive_L100 ops_s=0.97 p50_us=346 p99_us=641 calls_s=174 wire_s=0.97
bench backend=redis impl=redislock op=keepalive_L100 ops_s=100 p50_us=46 p99_us=64 calls_s=317
bench backend=zk impl=zklock op=handover ops_s=400 p50_us=2300 p99_us=3000
bench backend=zk impl=simba op=handover ops_s=500 p50_us=1900 p99_us=2500
bench backend=mysql impl=getlock op=acquire_release ops_s=8000 p50_us=94 p99_us=509
bench backend=postgres impl=simba op=acquire_release_c16 ops_s=2000 p50_us=7000 p99_us=9000
bench backend=postgres impl=lean op=acquire_release_c16 ops_s=4000 p50_us=3500 p99_us=5000
`

func TestRatios(t *testing.T) {
	got := ratios(chartLines)
	want := []ratio{
		{"memory", opAcquireRelease, "simba", "floor", 0.2},
		{"redis", opAcquireRelease, "simba", "spi", 0.8},
		{"redis", opAcquireRelease, "simba", "redislock", 0.5},
		{"redis", opAcquireRelease, "simba_async", "redislock", 1.5},
		{"zk", opHandover, "simba", "zklock", 1.25},
		{"postgres", opAcquireC16, "simba", "lean", 0.5},
	}
	if len(got) != len(want) {
		t.Fatalf("ratios: %+v, want %+v (keep-alive lines and a backend without Simba's line left out)", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.backend != w.backend || g.op != w.op || g.simba != w.simba || g.other != w.other || math.Abs(g.value-w.value) > 1e-9 {
			t.Fatalf("ratio %d: %+v, want %+v", i, g, w)
		}
	}
}

// The chart is well-formed XML that names every comparison and its ratio.
func TestWriteChart(t *testing.T) {
	var buf bytes.Buffer
	if err := writeChart(&buf, "run <1>", ratios(chartLines)); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	var text strings.Builder
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, buf.String())
		}
		if cd, ok := tok.(xml.CharData); ok {
			text.Write(cd)
			text.WriteByte('|')
		}
	}
	for _, s := range []string{"run <1>", "redis acquire_release: spi", "redislock", "0.50x", "redislock (simba_async)", "1.50x", "1.25x", "zk handover: zklock", "0.20x"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("chart text lacks %q: %s", s, text.String())
		}
	}
}
