package main

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// lineRecorder passes the measurement lines on to next and keeps a copy,
// from which the ratio chart is drawn at the end of the run.
type lineRecorder struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	next io.Writer
}

func (r *lineRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.buf.Write(p)
	r.mu.Unlock()
	return r.next.Write(p)
}

func (r *lineRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// ratio is the throughput of Simba (or of a variant such as simba_async)
// over another implementation's, for one backend and operation.
type ratio struct {
	backend, op, simba, other string
	value                     float64
}

// label names the other implementation, and the variant when it is not
// plain Simba.
func (r ratio) label() string {
	if r.simba == implSimba {
		return r.other
	}
	return r.other + " (" + r.simba + ")"
}

// chartOps are the operations the chart compares, in order.
var chartOps = []string{opAcquireRelease, opAcquireC16, opAcquireC64, opHandover}

// ratios reads the measurement lines and returns, for every backend and
// chart operation in the order of the lines, Simba's ops_s over that of
// every other implementation measured alongside it.
func ratios(lines string) []ratio {
	type key struct{ backend, op string }
	rates := map[key]map[string]float64{}
	var order []key
	impls := map[key][]string{}
	for line := range strings.Lines(lines) {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "bench" {
			continue
		}
		f := map[string]string{}
		for _, kv := range fields[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		k := key{f["backend"], f["op"]}
		v, err := strconv.ParseFloat(f["ops_s"], 64)
		if err != nil || k.backend == "" || !slices.Contains(chartOps, k.op) || v <= 0 {
			continue
		}
		if rates[k] == nil {
			rates[k] = map[string]float64{}
			order = append(order, k)
		}
		if _, seen := rates[k][f["impl"]]; !seen {
			impls[k] = append(impls[k], f["impl"])
		}
		rates[k][f["impl"]] = v
	}
	var out []ratio
	for _, k := range order {
		// Simba first, then its variants, each over the implementations
		// that are not Simba's (the spi line only beside Simba itself).
		for _, own := range impls[k] {
			if own != implSimba && !strings.HasPrefix(own, implSimba+"_") {
				continue
			}
			for _, impl := range impls[k] {
				if impl == implSimba || strings.HasPrefix(impl, implSimba+"_") || (impl == implSPI && own != implSimba) {
					continue
				}
				out = append(out, ratio{k.backend, k.op, own, impl, rates[k][own] / rates[k][impl]})
			}
		}
	}
	return out
}

// writeChart draws rs as horizontal bars on a logarithmic scale, with a
// line at 1 (as fast as the other), as a self-contained SVG document.
func writeChart(w io.Writer, title string, rs []ratio) error {
	const (
		rowH, top, labelW, barW, right = 20, 48, 300, 380, 70
		lo, hi                         = 0.05, 20.0 // the scale, in ratios
	)
	width, height := labelW+barW+right, top+rowH*len(rs)+40
	x := func(v float64) float64 {
		v = min(max(v, lo), hi)
		return labelW + barW*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="8" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="8" y="38" fill="#555">Simba's throughput over the other's (log scale): right of the line, Simba is faster</text>`+"\n")
	prev := ""
	for i, r := range rs {
		y := top + i*rowH
		group := r.backend + " " + r.op
		if group != prev && prev != "" {
			fmt.Fprintf(&b, `<line x1="8" x2="%d" y1="%d" y2="%d" stroke="#ddd"/>`+"\n", width-8, y, y)
		}
		label := r.label()
		if group != prev {
			label = group + ": " + label
		}
		prev = group
		fill := "#d9822b"
		if r.value >= 1 {
			fill = "#2b8a3e"
		}
		x0, x1 := x(1), x(r.value)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+14, html.EscapeString(label))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", min(x0, x1), y+4, max(abs(x1-x0), 1), rowH-8, fill)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%sx</text>`+"\n", max(x0, x1)+4, y+14, strconv.FormatFloat(r.value, 'f', 2, 64))
	}
	bottom := top + rowH*len(rs)
	fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black"/>`+"\n", x(1), x(1), top, bottom)
	for _, t := range []float64{0.1, 0.25, 0.5, 1, 2, 4, 10} {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%gx</text>`+"\n", x(t), bottom+16, t)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func abs(v float64) float64 { return max(v, -v) }
