// Package report writes the figures of robustness runs: a Markdown table
// per backend and fault, and an SVG strip plot of the failover times per
// backend.
package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/check"
	"github.com/simba-go/simba/tools/chaos/internal/suite"
)

// ms formats d in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%d", d.Milliseconds()) }

// Table writes the summary table of the outcomes.
func Table(w io.Writer, outs []*suite.Outcome) {
	fmt.Fprintln(w, "| backend | fault | injections | handovers | overlaps | permits beyond n | overlaps after eviction (bounded) | token regressions | stale writes accepted | late writes | stale writes refused | failovers | failover p50 / p99 / max (ms) |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, o := range outs {
		rows := slices.Clone(o.Result.Rows)
		total := o.Result.Total()
		rows = append(rows, &total)
		for _, r := range rows {
			fo := "-"
			if len(r.Failovers) > 0 {
				fo = fmt.Sprintf("%s / %s / %s", ms(check.Percentile(r.Failovers, 50)),
					ms(check.Percentile(r.Failovers, 99)), ms(check.Percentile(r.Failovers, 100)))
			}
			name := r.Fault
			if name == "all" {
				name = "**all**"
			}
			fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", o.Backend, name, r.Injections,
				r.Handovers, r.Overlaps, r.PermitOverlaps, r.EvictOverlaps, r.TokenRegressions, r.StaleAccepted, r.LateWrites, r.Refused, len(r.Failovers), fo)
		}
	}
}

// SVG writes a strip plot: one row per backend, one dot per failover after
// a node fault (SIGKILL dots filled, other faults hollow), a line at the
// bound of a crash failover, and the median marked.
func SVG(w io.Writer, outs []*suite.Outcome, bound time.Duration) {
	const (
		left, right, top, rowH, width = 110, 30, 50, 60, 760
	)
	maxD := bound
	for _, o := range outs {
		for _, r := range o.Result.Rows {
			for _, d := range r.Failovers {
				maxD = max(maxD, d)
			}
		}
	}
	scaleMax := math.Ceil(float64(maxD.Milliseconds())/500) * 500
	height := top + rowH*len(outs) + 50
	x := func(d time.Duration) float64 {
		return left + float64(d.Milliseconds())/scaleMax*(width-left-right)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">Failover after a fault on the node that held the lease (ms)</text>`+"\n", left-100)
	fmt.Fprintf(&b, `<circle cx="%d" cy="31" r="3" fill="#1f77b4" fill-opacity="0.6"/><text x="%d" y="35">SIGKILL</text>`+"\n", left-94, left-86)
	fmt.Fprintf(&b, `<circle cx="%d" cy="31" r="3" fill="none" stroke="#ff7f0e"/><text x="%d" y="35">SIGSTOP, black hole, cut off until expired, session evicted</text>`+"\n", left-24, left-16)
	fmt.Fprintf(&b, `<line x1="%d" y1="25" x2="%d" y2="37" stroke="black" stroke-width="2"/><text x="%d" y="35">median</text>`+"\n", left+340, left+340, left+346)
	axisY := top + rowH*len(outs)
	for t := 0.0; t <= scaleMax; t += 500 {
		xx := left + t/scaleMax*(width-left-right)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", xx, top, xx, axisY)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", xx, axisY+16, t)
	}
	bx := x(bound)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c00" stroke-dasharray="4 3"/>`+"\n", bx, top-5, bx, axisY)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#c00" text-anchor="middle">crash bound %d ms</text>`+"\n", bx, axisY+34, bound.Milliseconds())
	for i, o := range outs {
		cy := float64(top + rowH*i + rowH/2)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-10, cy, o.Backend)
		var all []time.Duration
		for _, r := range o.Result.Rows {
			for j, d := range r.Failovers {
				all = append(all, d)
				jitter := float64((j*7919)%21-10) * 1.6
				if r.Fault == suite.SigKill {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#1f77b4" fill-opacity="0.6"/>`+"\n", x(d), cy+jitter)
				} else {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="none" stroke="#ff7f0e" stroke-opacity="0.7"/>`+"\n", x(d), cy+jitter)
				}
			}
		}
		if len(all) > 0 {
			mx := x(check.Percentile(all, 50))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="2"/>`+"\n", mx, cy-22, mx, cy+22)
		}
	}
	b.WriteString("</svg>\n")
	_, _ = io.WriteString(w, b.String())
}
