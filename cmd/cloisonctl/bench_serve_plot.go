package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// sweepSVG draws a sweep as two panels of plain SVG: TTFT p50 and p99 (left)
// and TPOT p50 (right) in ms against the offered load, each point labelled
// with the output tokens/s it achieved.
func sweepSVG(title, xlabel string, xs []float64, runs []*serveMetrics) string {
	const W, H, pw, ph, left, top = 960, 420, 380, 280, 70, 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	ttft50, ttft99, tpot50 := make([]float64, len(runs)), make([]float64, len(runs)), make([]float64, len(runs))
	for i, m := range runs {
		ttft50[i], ttft99[i], tpot50[i] = m.TTFT.P50, m.TTFT.P99, m.TPOT.P50
	}
	type series struct {
		name, color string
		ys          []float64
	}
	panel := func(x0 int, ytitle string, ss []series) {
		xlabel := xlabel
		xmax, ymax := 0.0, 0.0
		for i := range xs {
			xmax = math.Max(xmax, xs[i])
			for _, s := range ss {
				ymax = math.Max(ymax, s.ys[i])
			}
		}
		ymax = niceCeil(ymax)
		// Loads spread over a factor of 8 or more (1, 4, 16, 64 clients)
		// go on a log axis; the ticks are the swept values.
		xmin := slices.Min(xs)
		logx := xmin > 0 && xmax/xmin >= 8
		px := func(x float64) float64 { return float64(x0) + 10 + x/xmax*(pw-20) }
		if logx {
			px = func(x float64) float64 { return float64(x0) + 10 + math.Log(x/xmin)/math.Log(xmax/xmin)*(pw-20) }
		}
		py := func(y float64) float64 { return top + ph - y/ymax*ph }
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", x0, top, pw, ph)
		for k := 0; k <= 4; k++ {
			yv := ymax * float64(k) / 4
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0, x0+pw, py(yv), py(yv), x0-6, py(yv)+4, tick(yv))
		}
		for _, xv := range xs {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#888"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(xv), px(xv), top+ph, top+ph+4, px(xv), top+ph+16, tick(xv))
		}
		if logx {
			xlabel += " (log scale)"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(x0)+pw/2, top+ph+36, html.EscapeString(xlabel))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, top-10, html.EscapeString(ytitle))
		for si, s := range ss {
			var pts []string
			for i := range xs {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(xs[i]), py(s.ys[i])))
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), s.color)
			for i := range xs {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %g: %.1f ms, %.0f out tok/s</title></circle>`+"\n",
					px(xs[i]), py(s.ys[i]), s.color, html.EscapeString(s.name), xs[i], s.ys[i], runs[i].OutputThroughput)
			}
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text>`+"\n",
				x0+10, x0+30, top+14+16*si, top+14+16*si, s.color, x0+36, top+18+16*si, html.EscapeString(s.name))
		}
	}
	panel(left, "Time to first token (ms)", []series{{"TTFT p50", "#1f77b4", ttft50}, {"TTFT p99", "#d62728", ttft99}})
	panel(left+pw+110, "Time per output token (ms)", []series{{"TPOT p50", "#2ca02c", tpot50}})
	var tp []string
	for i, m := range runs {
		tp = append(tp, fmt.Sprintf("%g→%.0f", xs[i], m.OutputThroughput))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">output tok/s at each load: %s</text>`+"\n", left, H-14, html.EscapeString(strings.Join(tp, ", ")))
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 1.5, 2, 3, 4, 5, 6 or 8 times a power of ten
// (1 for v ≤ 0): quarter ticks stay round and the curves fill the panel.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 3, 4, 5, 6, 8, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
