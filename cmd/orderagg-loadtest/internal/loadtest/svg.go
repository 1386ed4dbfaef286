package loadtest

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// A small SVG line-chart writer for the experiments' plots. Hand-written
// SVG keeps plotting out of the service's go.mod (a plotting library would
// pull in fonts and image codecs for two charts) and gives files that diff
// and render anywhere, GitHub included.

// chart is one figure: panels stacked vertically over a shared x axis.
type chart struct {
	Title  string
	XLabel string
	// XTicks, when set, replace the automatic x ticks (e.g. bulkhead sizes
	// on a log2 axis).
	XTicks []tick
	Panels []panel
}

type tick struct {
	X     float64
	Label string
}

// panel is one plot area with its own y axis.
type panel struct {
	Title  string
	YLabel string
	Series []series
	// Shade marks x ranges (an outage) with a light band.
	Shade [][2]float64
	// ShadeLabel is written in the first band.
	ShadeLabel string
}

type series struct {
	Name    string
	X, Y    []float64
	Color   string
	Dashed  bool
	Markers bool
}

const (
	svgWidth     = 760
	panelHeight  = 200
	marginLeft   = 70
	marginRight  = 20
	titleHeight  = 36
	panelTop     = 44 // per panel: its title and legend
	xAxisSpace   = 46
	panelSpacing = 24
)

// Colours that stay apart for the colour-blind (Okabe-Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"}

// svg renders the chart.
func (c chart) svg() []byte {
	var b bytes.Buffer
	height := titleHeight + len(c.Panels)*(panelTop+panelHeight+panelSpacing) + xAxisSpace
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, esc(c.Title))

	x := c.xAxis()
	top := titleHeight
	for i, p := range c.Panels {
		p.write(&b, x, top, i == len(c.Panels)-1)
		top += panelTop + panelHeight + panelSpacing
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", marginLeft+x.width/2, height-8, esc(c.XLabel))
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// xAxis is the x axis every panel of a chart shares.
type xAxis struct {
	min, max float64
	width    float64 // of the plot area, in pixels
	ticks    []tick
}

// xAxis spans every series' x values and the chart's own ticks; without
// ticks of its own the chart gets round ones.
func (c chart) xAxis() xAxis {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, p := range c.Panels {
		for _, s := range p.Series {
			for _, x := range s.X {
				xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			}
		}
	}
	for _, t := range c.XTicks {
		xmin, xmax = math.Min(xmin, t.X), math.Max(xmax, t.X)
	}
	if !(xmax > xmin) {
		xmin, xmax = 0, 1
	}
	ticks := c.XTicks
	if ticks == nil {
		for _, v := range niceTicks(xmin, xmax, 8) {
			ticks = append(ticks, tick{v, num(v)})
		}
	}
	return xAxis{min: xmin, max: xmax, width: float64(svgWidth - marginLeft - marginRight), ticks: ticks}
}

// px is x's position in pixels.
func (a xAxis) px(x float64) float64 { return marginLeft + (x-a.min)/(a.max-a.min)*a.width }

// write renders the panel whose title sits at top; the last panel of a
// chart also labels the x axis.
func (p panel) write(b *bytes.Buffer, x xAxis, top int, last bool) {
	y0 := float64(top + panelTop)               // top of the plot area
	y1 := float64(top + panelTop + panelHeight) // its bottom
	ymax := 0.0
	for _, s := range p.Series {
		for _, y := range s.Y {
			ymax = math.Max(ymax, y)
		}
	}
	yt := niceTicks(0, ymax, 5)
	ytop := yt[len(yt)-1]
	py := func(y float64) float64 { return y1 - y/ytop*(y1-y0) }

	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", marginLeft, top+14, esc(p.Title))
	p.writeLegend(b, top)
	for k, band := range p.Shade {
		xa, xb := x.px(band[0]), x.px(band[1])
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f3d6d6"/>`+"\n", xa, y0, xb-xa, y1-y0)
		if k == 0 && p.ShadeLabel != "" {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#a33" text-anchor="middle">%s</text>`+"\n", (xa+xb)/2, y0+14, esc(p.ShadeLabel))
		}
	}
	// Grid and y axis.
	for _, v := range yt {
		y := py(v)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", marginLeft, y, svgWidth-marginRight, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginLeft-6, y+4, num(v))
	}
	fmt.Fprintf(b, `<text transform="translate(16,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y0+y1)/2, esc(p.YLabel))
	for _, t := range x.ticks {
		tx := x.px(t.X)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", tx, y0, tx, y1)
		if last {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", tx, y1+16, esc(t.Label))
		}
	}
	fmt.Fprintf(b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`+"\n", marginLeft, y0, x.width, y1-y0)
	p.writeSeries(b, x, py)
}

func (p panel) writeLegend(b *bytes.Buffer, top int) {
	lx := marginLeft
	for j, s := range p.Series {
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, top+30, lx+18, top+30, colorOf(s, j), dashOf(s))
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", lx+22, top+34, esc(s.Name))
		lx += 34 + 7*len(s.Name)
	}
}

// writeSeries draws each series as a line, with its markers if it has them.
func (p panel) writeSeries(b *bytes.Buffer, x xAxis, py func(float64) float64) {
	for j, s := range p.Series {
		col := colorOf(s, j)
		var pts bytes.Buffer
		for k := range s.X {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x.px(s.X[k]), py(s.Y[k]))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dashOf(s), bytes.TrimSpace(pts.Bytes()))
		if s.Markers {
			for k := range s.X {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x.px(s.X[k]), py(s.Y[k]), col)
			}
		}
	}
}

// dashOf is the stroke attribute of a dashed series, or nothing.
func dashOf(s series) string {
	if s.Dashed {
		return ` stroke-dasharray="5,3"`
	}
	return ""
}

func colorOf(s series, i int) string {
	if s.Color != "" {
		return s.Color
	}
	return palette[i%len(palette)]
}

// niceTicks returns about n round tick values covering [lo, hi], the last
// one at or above hi.
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / float64(n))
	start := math.Floor(lo/step) * step
	var out []float64
	for v := start; ; v += step {
		out = append(out, v)
		if v >= hi-step*1e-9 {
			break
		}
	}
	return out
}

// niceStep rounds a raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func num(v float64) string {
	if math.Abs(v-math.Round(v)) < 1e-9 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func esc(s string) string { return html.EscapeString(s) }
