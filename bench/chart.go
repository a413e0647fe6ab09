package bench

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart size: two plots side by side, readable on a laptop screen and in a document.
const (
	chartWidth  = 26 * vg.Centimeter
	chartHeight = 10 * vg.Centimeter
)

// WriteChart draws queries/s and p99 latency against threads, one line per side, into path. The
// extension picks the format: .png, .svg, or .html (a self-contained page: the SVG with its fonts
// inline and the text report; it loads nothing from the network, so it opens offline).
func WriteChart(path string, rep Report) error {
	var buf bytes.Buffer
	var err error
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png":
		err = renderPNG(&buf, rep)
	case ".svg":
		err = renderSVG(&buf, rep)
	case ".html", ".htm":
		err = renderHTML(&buf, rep)
	default:
		return fmt.Errorf("chart %s: unknown format %q, use .html, .svg or .png", path, ext)
	}
	if err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

// plots builds the throughput and p99 plots. The thread axis is logarithmic because sweeps
// usually multiply the thread count (1, 4, 16, 64).
func plots(rep Report) ([]*plot.Plot, error) {
	qps, p99 := plot.New(), plot.New()
	qps.Title.Text = "Throughput (higher is better)"
	qps.Y.Label.Text = "queries/s"
	p99.Title.Text = "p99 latency (lower is better)"
	p99.Y.Label.Text = "ms"
	for _, p := range []*plot.Plot{qps, p99} {
		p.X.Label.Text = "threads"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = threadTicks(rep.Threads)
		p.Y.Min = 0
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
	}
	for i, res := range rep.Results {
		label := res.Label
		if res.Engine != "" && res.Engine != res.Label {
			label += " (" + res.Engine + ")"
		}
		var q, l plotter.XYs
		for _, s := range res.Steps {
			q = append(q, plotter.XY{X: float64(s.Threads), Y: s.Total.QPS})
			l = append(l, plotter.XY{X: float64(s.Threads), Y: s.Total.P99})
		}
		for _, pair := range []struct {
			p   *plot.Plot
			pts plotter.XYs
		}{{qps, q}, {p99, l}} {
			if len(pair.pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pair.pts)
			if err != nil {
				return nil, err
			}
			line.Color = plotutil.Color(i)
			line.Width = vg.Points(2)
			points.Color = plotutil.Color(i)
			points.Shape = plotutil.Shape(i)
			pair.p.Add(line, points)
			pair.p.Legend.Add(label, line, points)
		}
	}
	// Headroom above the highest point keeps the legend (top left) off the lines.
	for _, p := range []*plot.Plot{qps, p99} {
		if p.Y.Max > 0 {
			p.Y.Max *= 1.3
		}
	}
	return []*plot.Plot{qps, p99}, nil
}

// threadTicks labels exactly the measured thread counts.
func threadTicks(threads []int) plot.Ticker {
	ticks := make(plot.ConstantTicks, len(threads))
	for i, n := range threads {
		ticks[i] = plot.Tick{Value: float64(n), Label: strconv.Itoa(n)}
	}
	return ticks
}

func drawPlots(c vg.CanvasSizer, rep Report) error {
	ps, err := plots(rep)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: len(ps), PadX: vg.Centimeter, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3,
		PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align([][]*plot.Plot{ps}, tiles, dc)
	for i, p := range ps {
		p.Draw(canvases[0][i])
	}
	return nil
}

func renderPNG(w io.Writer, rep Report) error {
	c := vgimg.NewWith(vgimg.UseWH(chartWidth, chartHeight), vgimg.UseDPI(144))
	if err := drawPlots(c, rep); err != nil {
		return err
	}
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

func renderSVG(w io.Writer, rep Report) error {
	// Embedded fonts: the SVG looks the same on a machine without Liberation fonts installed.
	c := vgsvg.NewWith(vgsvg.UseWH(chartWidth, chartHeight), vgsvg.EmbedFonts(true))
	if err := drawPlots(c, rep); err != nil {
		return err
	}
	_, err := c.WriteTo(w)
	return err
}

func renderHTML(w io.Writer, rep Report) error {
	var svg, text bytes.Buffer
	if err := renderSVG(&svg, rep); err != nil {
		return err
	}
	if err := rep.WriteText(&text); err != nil {
		return err
	}
	// Drop the XML prolog: the SVG is inlined in HTML, where it is not allowed.
	s := svg.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	title := fmt.Sprintf("enginemig bench: %s.%s", rep.Schema, rep.Table)
	_, err := fmt.Fprintf(w, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em;overflow-x:auto}</style>
</head><body>
<h1>%s</h1>
<p>Mix %s from %s; %gs per step after %gs warm-up; mode %s.</p>
%s
<pre>%s</pre>
</body></html>
`, html.EscapeString(title), html.EscapeString(title), html.EscapeString(rep.Mix.String()), html.EscapeString(rep.Mix.Source),
		rep.Seconds, rep.Warmup, html.EscapeString(rep.Mode), s, html.EscapeString(text.String()))
	return err
}
