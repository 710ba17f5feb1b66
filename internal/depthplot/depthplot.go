// Package depthplot draws a market's depth curve (cumulative $/hr against
// cumulative vCPU and RAM of the top N ranked offers) as an SVG or a PNG
// image, for `market depth --plot` and the coordinator's dashboard.
package depthplot

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/market"
)

// The depth plot: cumulative $/hr on x, cumulative vCPU (solid) and RAM
// (dashed, right axis) on y, one point per top-N prefix of the ranking.
const (
	plotW, plotH        = 800, 500
	plotL, plotR        = 70, 70
	plotTop, plotBottom = 40, 60
	plotInnerW          = plotW - plotL - plotR
	plotInnerH          = plotH - plotTop - plotBottom
	plotTicks           = 5
	plotVCPUColor       = "#1f77b4"
	plotRAMColor        = "#d62728"
	plotGridColor       = "#dddddd"
	plotAxisColor       = "#333333"
	plotFont            = "font-family=\"sans-serif\""
	plotTitleFontSize   = 15
)

type plotScale struct{ maxX, maxY, maxY2 float64 }

func newPlotScale(curve []market.Depth) plotScale {
	var s plotScale
	for _, d := range curve {
		s.maxX = math.Max(s.maxX, d.DPH)
		s.maxY = math.Max(s.maxY, d.VCPU)
		s.maxY2 = math.Max(s.maxY2, d.RAMGB)
	}
	s.maxX, s.maxY, s.maxY2 = niceCeil(s.maxX), niceCeil(s.maxY), niceCeil(s.maxY2)
	return s
}

func (s plotScale) x(v float64) float64  { return plotL + v/s.maxX*plotInnerW }
func (s plotScale) y(v float64) float64  { return plotTop + plotInnerH - v/s.maxY*plotInnerH }
func (s plotScale) y2(v float64) float64 { return plotTop + plotInnerH - v/s.maxY2*plotInnerH }

// niceCeil rounds up to 1, 2 or 5 times a power of ten, so ticks read well.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// SVG plots the curve and marks the points whose N is in marks.
func SVG(curve []market.Depth, marks []int, rankedBy string) string {
	s := newPlotScale(curve)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" %s font-size="%d" font-weight="bold">Market depth: top N offers ranked by %s</text>`+"\n", plotL, plotFont, plotTitleFontSize, rankedBy)
	for i := 0; i <= plotTicks; i++ {
		fx := s.maxX * float64(i) / plotTicks
		fy := s.maxY * float64(i) / plotTicks
		fy2 := s.maxY2 * float64(i) / plotTicks
		x, y := s.x(fx), s.y(fy)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, plotTop, x, plotTop+plotInnerH, plotGridColor)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", plotL, y, plotL+plotInnerW, y, plotGridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" %s font-size="12" text-anchor="middle">%s</text>`+"\n", x, plotTop+plotInnerH+18, plotFont, trimFloat(fx))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" %s font-size="12" text-anchor="end" fill="%s">%s</text>`+"\n", plotL-6, y+4, plotFont, plotVCPUColor, trimFloat(fy))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" %s font-size="12" fill="%s">%s</text>`+"\n", plotL+plotInnerW+6, y+4, plotFont, plotRAMColor, trimFloat(fy2))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", plotL, plotTop, plotInnerW, plotInnerH, plotAxisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" %s font-size="12" text-anchor="middle">cumulative $/hr</text>`+"\n", plotL+plotInnerW/2, plotH-20, plotFont)
	fmt.Fprintf(&b, `<text x="16" y="%d" %s font-size="12" fill="%s" transform="rotate(-90 16 %d)" text-anchor="middle">cumulative vCPU</text>`+"\n", plotTop+plotInnerH/2, plotFont, plotVCPUColor, plotTop+plotInnerH/2)
	fmt.Fprintf(&b, `<text x="%d" y="%d" %s font-size="12" fill="%s" transform="rotate(90 %d %d)" text-anchor="middle">cumulative RAM GB</text>`+"\n", plotW-14, plotTop+plotInnerH/2, plotFont, plotRAMColor, plotW-14, plotTop+plotInnerH/2)
	var vcpu, ram []string
	for _, d := range curve {
		vcpu = append(vcpu, fmt.Sprintf("%.1f,%.1f", s.x(d.DPH), s.y(d.VCPU)))
		ram = append(ram, fmt.Sprintf("%.1f,%.1f", s.x(d.DPH), s.y2(d.RAMGB)))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", plotVCPUColor, strings.Join(vcpu, " "))
	fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="6 4" points="%s"/>`+"\n", plotRAMColor, strings.Join(ram, " "))
	for _, d := range curve {
		if !slices.Contains(marks, d.N) {
			continue
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>top %d: %.0f vCPU, %.0f GB, $%.3f/hr</title></circle>`+"\n",
			s.x(d.DPH), s.y(d.VCPU), plotVCPUColor, d.N, d.VCPU, d.RAMGB, d.DPH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" %s font-size="10">top %d</text>`+"\n", s.x(d.DPH)+5, s.y(d.VCPU)-5, plotFont, d.N)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// PNG draws what SVG draws: the title, both curves, the grid,
// ticks with their values on all three axes, the axis names (the y names
// turned as in the SVG) and the marked points, in the fixed 7×13 font of
// golang.org/x/image (the standard library has none).
func PNG(curve []market.Depth, marks []int, rankedBy string) ([]byte, error) {
	s := newPlotScale(curve)
	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	fill(img, img.Bounds(), color.White)
	grid := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	axis := color.RGBA{0x33, 0x33, 0x33, 0xff}
	blue := color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	red := color.RGBA{0xd6, 0x27, 0x28, 0xff}
	pngText(img, plotL, 24, "Market depth: top N offers ranked by "+rankedBy, axis)
	bottom, right := plotTop+plotInnerH, plotL+plotInnerW
	for i := 0; i <= plotTicks; i++ {
		fx := s.maxX * float64(i) / plotTicks
		fy := s.maxY * float64(i) / plotTicks
		fy2 := s.maxY2 * float64(i) / plotTicks
		x, y := int(s.x(fx)), int(s.y(fy))
		line(img, x, plotTop, x, bottom, grid)
		line(img, plotL, y, right, y, grid)
		// Ticks outside the frame, then their values.
		line(img, x, bottom, x, bottom+4, axis)
		line(img, plotL-4, y, plotL, y, blue)
		line(img, right, y, right+4, y, red)
		xl, yl, y2l := trimFloat(fx), trimFloat(fy), trimFloat(fy2)
		pngText(img, x-pngTextWidth(xl)/2, bottom+18, xl, axis)
		pngText(img, plotL-8-pngTextWidth(yl), y+4, yl, blue)
		pngText(img, right+8, y+4, y2l, red)
	}
	frame := []image.Point{{plotL, plotTop}, {right, plotTop}, {right, bottom}, {plotL, bottom}, {plotL, plotTop}}
	for i := 1; i < len(frame); i++ {
		line(img, frame[i-1].X, frame[i-1].Y, frame[i].X, frame[i].Y, axis)
	}
	const xName, yName, y2Name = "cumulative $/hr", "cumulative vCPU", "cumulative RAM GB"
	pngText(img, plotL+plotInnerW/2-pngTextWidth(xName)/2, plotH-20, xName, axis)
	pngTextTurned(img, 10, plotTop+plotInnerH/2, yName, blue, true)
	pngTextTurned(img, plotW-22, plotTop+plotInnerH/2, y2Name, red, false)
	for i := 1; i < len(curve); i++ {
		a, b := curve[i-1], curve[i]
		thick(img, s.x(a.DPH), s.y(a.VCPU), s.x(b.DPH), s.y(b.VCPU), blue)
		thick(img, s.x(a.DPH), s.y2(a.RAMGB), s.x(b.DPH), s.y2(b.RAMGB), red)
	}
	for _, d := range curve {
		if !slices.Contains(marks, d.N) {
			continue
		}
		cx, cy := int(s.x(d.DPH)), int(s.y(d.VCPU))
		fill(img, image.Rect(cx-3, cy-3, cx+4, cy+4), blue)
		pngText(img, cx+5, cy-5, fmt.Sprintf("top %d", d.N), axis)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// pngText draws s with its baseline at y.
func pngText(img draw.Image, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func pngTextWidth(s string) int {
	return font.MeasureString(basicfont.Face7x13, s).Round()
}

// pngTextTurned draws s a quarter turn, centred on (x, y): reading upwards
// (counterclockwise) for the left axis, downwards for the right one.
func pngTextTurned(img *image.RGBA, x, y int, s string, c color.Color, up bool) {
	w, h := pngTextWidth(s), basicfont.Face7x13.Height
	flat := image.NewRGBA(image.Rect(0, 0, w, h))
	pngText(flat, 0, basicfont.Face7x13.Ascent, s, c)
	for fy := 0; fy < h; fy++ {
		for fx := 0; fx < w; fx++ {
			if flat.RGBAAt(fx, fy).A == 0 {
				continue
			}
			px, py := x+fy, y+w/2-fx // counterclockwise
			if !up {
				px, py = x+h-1-fy, y-w/2+fx
			}
			img.Set(px, py, flat.At(fx, fy))
		}
	}
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.Set(x, y, c)
		}
	}
}

func thick(img *image.RGBA, x0, y0, x1, y1 float64, c color.Color) {
	for d := -1; d <= 1; d++ {
		line(img, int(x0), int(y0)+d, int(x1), int(y1)+d, c)
	}
}

// line is Bresenham's algorithm.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	err := dx + dy
	for {
		img.Set(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * err
		if e2 >= dy {
			err += dy
			x0 += sx
		}
		if e2 <= dx {
			err += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// CheckName refuses a file name Write cannot pick a format for.
func CheckName(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg", ".png":
		return nil
	}
	return fmt.Errorf("--plot %s: the file name must end in .svg or .png", path)
}

// Curve is the depth of the top offers up to n (at most every offer
// ranked), sampled densely enough for a smooth plot, with the table's rows
// (tops) among the points so the plot can mark them.
func Curve(ranked []market.Ranked, n int, tops []int) []market.Depth {
	return market.DepthTable(ranked, curvePoints(min(len(ranked), n), tops))
}

// curvePoints samples 1..n densely enough for a smooth plot, with the
// table's rows among them so the plot can mark them.
func curvePoints(n int, tops []int) []int {
	var pts []int
	for i := 1; i <= n; i += max(1, n/200) {
		pts = append(pts, i)
	}
	for _, t := range tops {
		if t <= n {
			pts = append(pts, t)
		}
	}
	if n > 0 {
		pts = append(pts, n)
	}
	slices.Sort(pts)
	return slices.Compact(pts)
}

// Write draws the curve to path, a PNG if its name ends in .png and an SVG
// otherwise, marking the points whose N is in marks.
func Write(path string, curve []market.Depth, marks []int, rankedBy string) error {
	var data []byte
	var err error
	if strings.EqualFold(filepath.Ext(path), ".png") {
		data, err = PNG(curve, marks, rankedBy)
	} else {
		data = []byte(SVG(curve, marks, rankedBy))
	}
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o644)
}

// WriteTable writes to path the curve of the depth table over ranked with
// rows tops: the top offers up to its largest row.
func WriteTable(path string, ranked []market.Ranked, tops []int, rankedBy string) error {
	return Write(path, Curve(ranked, slices.Max(tops), tops), tops, rankedBy)
}
