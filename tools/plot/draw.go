package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The size of the SVG and of its parts.
const (
	width        = 9 * vg.Inch
	height       = 5.5 * vg.Inch
	legendWidth  = 1.9 * vg.Inch
	captionLines = 2
	margin       = 0.15 * vg.Inch
)

// seriesColor is the colour of series i, named name: blue for the
// Sender, orange for hand-made batches, plotutil's for other names.
func seriesColor(name string, i int) color.Color {
	switch name {
	case "sender":
		return color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	case "hand-made":
		return color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	}
	return plotutil.Color(i)
}

// writeSVG draws r into the SVG file path.
func writeSVG(path string, r report) error {
	img := vgsvg.New(width, height)
	if err := drawReport(img, r); err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return fmt.Errorf("draw SVG: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write SVG: %w", err)
	}
	return nil
}

// drawReport draws r on img: the plot, the legend at its right and the
// caption under both, on white.
func drawReport(img vg.CanvasSizer, r report) error {
	p, legend, err := newPlot(r)
	if err != nil {
		return err
	}
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	sty := p.X.Tick.Label
	sty.Font.Size = vg.Points(8)
	sty.XAlign, sty.YAlign = text.XLeft, text.YBottom
	lineHeight := sty.Rectangle("Mg").Size().Y * 1.3
	for i, line := range caption(r) {
		dc.FillText(sty, vg.Point{X: margin, Y: margin + vg.Length(captionLines-1-i)*lineHeight}, line)
	}
	body := draw.Crop(dc, margin, -margin, margin+captionLines*lineHeight+margin, -margin)
	legend.Draw(draw.Crop(body, body.Size().X-legendWidth, 0, 0, -lineHeight*2))
	p.Draw(draw.Crop(body, 0, -legendWidth-margin, 0, 0))
	return nil
}

// newPlot returns the plot of r's series, both axes logarithmic, and the
// legend of its lines. Each point is a median, with a bar from the
// slowest run to the fastest.
func newPlot(r report) (*plot.Plot, plot.Legend, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Sending %s entries to the SQS stand-in: records/s by requests in flight", size(r.EntryBytes))
	p.X.Label.Text = "SendMessageBatch requests in flight (MaxInFlight)"
	p.Y.Label.Text = "records/s (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	for _, sty := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label, &legend.TextStyle} {
		sty.Font.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = vg.Points(13)
	legend.TextStyle.Font.Size = vg.Points(10)
	legend.Padding = vg.Points(4)
	legend.Top, legend.Left = true, true
	var flights []float64
	lo, hi := math.Inf(1), math.Inf(-1)
	latencies := map[float64]int{}
	for i, s := range r.Series {
		xys := make(plotter.XYs, len(s.Points))
		spread := make(plotter.YErrors, len(s.Points))
		for j, pt := range s.Points {
			xys[j] = plotter.XY{X: float64(pt.InFlight), Y: pt.RecordsPerSecond}
			flights = append(flights, float64(pt.InFlight))
			low, high := pt.RecordsPerSecond, pt.RecordsPerSecond
			for _, run := range pt.Runs {
				low, high = min(low, run), max(high, run)
			}
			spread[j].Low, spread[j].High = pt.RecordsPerSecond-low, high-pt.RecordsPerSecond
			lo, hi = min(lo, low), max(hi, high)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, plot.Legend{}, fmt.Errorf("series %s at %v ms: %w", s.Name, s.LatencyMS, err)
		}
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{xys, spread})
		if err != nil {
			return nil, plot.Legend{}, fmt.Errorf("series %s at %v ms: %w", s.Name, s.LatencyMS, err)
		}
		c := seriesColor(s.Name, i)
		if _, ok := latencies[s.LatencyMS]; !ok {
			latencies[s.LatencyMS] = len(latencies)
		}
		line.Color, line.Width = c, vg.Points(1.5)
		line.Dashes = plotutil.Dashes(latencies[s.LatencyMS])
		points.Color, points.Shape = c, plotutil.Shape(latencies[s.LatencyMS])
		bars.Color, bars.Width, bars.CapWidth = c, vg.Points(0.75), vg.Points(4)
		p.Add(bars, line, points)
		legend.Add(fmt.Sprintf("%s, %s ms added", s.Name, strconv.FormatFloat(s.LatencyMS, 'f', -1, 64)), line, points)
	}
	slices.Sort(flights)
	flights = slices.Compact(flights)
	var xticks plot.ConstantTicks
	for _, f := range flights {
		xticks = append(xticks, plot.Tick{Value: f, Label: strconv.FormatFloat(f, 'f', -1, 64)})
	}
	p.X.Tick.Marker = xticks
	p.X.Min, p.X.Max = flights[0]/1.15, flights[len(flights)-1]*1.15
	p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	p.Y.Tick.Marker = ticks125{}
	return p, legend, nil
}

// ticks125 marks 1, 2 and 5 of each power of ten with a label, and the
// other integers of each decade without.
type ticks125 struct{}

// Ticks returns the ticks between lo and hi, which must be > 0.
func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for decade := math.Pow(10, math.Floor(math.Log10(lo))); decade <= hi; decade *= 10 {
		for m := 1.0; m < 10; m++ {
			v := m * decade
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = short(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// short writes v with a k or M suffix: 2000 is "2k".
func short(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// size writes a number of bytes: 1024 is "1 KiB".
func size(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d-byte", n)
}

// caption returns the lines under the plot: the machine and the date,
// then the command and how the points were measured.
func caption(r report) [captionLines]string {
	m := r.Machine
	cpu := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.CPUModel != "" {
		cpu += " (" + m.CPUModel + ")"
	}
	var entries []string
	for _, s := range r.Series {
		e := fmt.Sprintf("%d entries a run at %s ms", s.Entries, strconv.FormatFloat(s.LatencyMS, 'f', -1, 64))
		if !slices.Contains(entries, e) {
			entries = append(entries, e)
		}
	}
	runs := len(r.Series[0].Points[0].Runs)
	how := "one run a point"
	if runs > 1 {
		how = fmt.Sprintf("each point is the median of %d runs, its bar spans them", runs)
	}
	return [captionLines]string{
		fmt.Sprintf("%s %s/%s, %s, GOMAXPROCS=%d, %s; the SQS stand-in runs on the same CPUs.",
			r.Date.Format("2006-01-02"), m.GOOS, m.GOARCH, cpu, m.GOMAXPROCS, m.GoVersion),
		fmt.Sprintf("%s: %s; %s.", r.Command, strings.Join(entries, ", "), how),
	}
}
