// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Chart is one significant row's drawing: its two distributions, or
// its two shares measured.
type Chart struct {
	Title string
	// SVG is the drawing, an SVG document made by gonum/plot.
	SVG []byte
}

// maxChartValues bounds the values a box of a chart is drawn from.
const maxChartValues = 20000

// Charts draws each significant row: the two sides' distributions of a
// row whose durations (or critical-path shares) changed, as box plots;
// the two shares measured of a row whose only change is how often it was
// measured, as bars.
func (r *Report) Charts() ([]Chart, error) {
	var out []Chart
	for i := range r.Rows {
		row := &r.Rows[i]
		if !row.Significant() {
			continue
		}
		var p *plot.Plot
		var err error
		if row.Duration.Significant {
			p, err = boxes("ms", row.Base.Values, row.New.Values)
		} else {
			p, err = bars(row.Base.Share(), row.New.Share())
		}
		if err != nil {
			return nil, fmt.Errorf("drawing %s: %w", row.Key, err)
		}
		title := row.Key.String()
		p.Title.Text = title
		c, err := draw(title, p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	for i := range r.Critical {
		row := &r.Critical[i]
		if !row.Share.Significant {
			continue
		}
		p, err := boxes("share of the request", row.Base, row.New)
		if err != nil {
			return nil, fmt.Errorf("drawing %s: %w", row.Key, err)
		}
		title := "critical path: " + row.Key.String()
		p.Title.Text = title
		c, err := draw(title, p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

var (
	baseColor = color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}
	newColor  = color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff}
)

func boxes(unit string, base, new []float64) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = unit
	for i, vals := range [][]float64{base, new} {
		b, err := plotter.NewBoxPlot(vg.Points(40), float64(i), plotter.Values(chartValues(vals)))
		if err != nil {
			return nil, err
		}
		b.FillColor = []color.Color{baseColor, newColor}[i]
		p.Add(b)
	}
	p.NominalX("base", "new")
	return p, nil
}

// chartValues is at most maxChartValues of the sorted vals, evenly spread
// over them, the least and the greatest included: a box drawn from them is
// the box of all (a prefix would be of the smallest only).
func chartValues(vals []float64) []float64 {
	n := len(vals)
	if n <= maxChartValues {
		return vals
	}
	out := make([]float64, maxChartValues)
	for i := range out {
		out[i] = vals[i*(n-1)/(maxChartValues-1)]
	}
	return out
}

func bars(base, new float64) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = "share of requests that measured it"
	p.Y.Min, p.Y.Max = 0, 1
	for i, v := range []float64{base, new} {
		b, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(40))
		if err != nil {
			return nil, err
		}
		b.Offset = vg.Points(float64(i)*50 - 25)
		b.Color = []color.Color{baseColor, newColor}[i]
		p.Add(b)
	}
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "base   new"}})
	return p, nil
}

func draw(title string, p *plot.Plot) (Chart, error) {
	p.Title.TextStyle.Font.Size = vg.Points(9)
	wt, err := p.WriterTo(4*vg.Inch, 3*vg.Inch, "svg")
	if err != nil {
		return Chart{}, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return Chart{}, err
	}
	return Chart{Title: title, SVG: b.Bytes()}, nil
}

// WriteHTML writes the report as one self-contained HTML page: both
// tables, and a chart of each significant row, each an SVG image in the
// page itself. It loads nothing from anywhere.
func (r *Report) WriteHTML(w io.Writer, names Names) error {
	charts, err := r.Charts()
	if err != nil {
		return err
	}
	type img struct {
		Title string
		Src   template.URL
	}
	var imgs []img
	for _, c := range charts {
		imgs = append(imgs, img{c.Title, template.URL("data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString(c.SVG))})
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, names); err != nil {
		return err
	}
	return page.Execute(w, struct {
		Names  Names
		Method string
		Base   string
		New    string
		Charts []img
		Text   string
	}{names, r.Method(), r.Base.describe(), r.New.describe(), imgs, text.String()})
}

var page = template.Must(template.New("diff").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>omnitrace diff: {{.Names.Base}} vs {{.Names.New}}</title>
<style>
body { font-family: sans-serif; margin: 2em; }
pre { font-size: 12px; overflow-x: auto; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; }
figcaption { font-size: 13px; max-width: 384px; }
</style></head><body>
<h1>omnitrace diff</h1>
<p>base: {{.Names.Base}}: {{.Base}}<br>new: {{.Names.New}}: {{.New}}</p>
<p>{{.Method}}</p>
<h2>Significant rows</h2>
{{if .Charts}}<div class="charts">
{{range .Charts}}<figure class="chart"><img alt="{{.Title}}" width="384" height="288" src="{{.Src}}"><figcaption>{{.Title}}</figcaption></figure>
{{end}}</div>{{else}}<p>None: no row changed significantly.</p>{{end}}
<h2>All rows</h2>
<pre>{{.Text}}</pre>
</body></html>
`))
