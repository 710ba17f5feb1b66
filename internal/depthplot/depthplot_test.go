package depthplot

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

func TestPNGLabelled(t *testing.T) {
	var ranked []market.Ranked
	for i := 1; i <= 50; i++ {
		ranked = append(ranked, market.Ranked{Offer: market.Offer{ID: int64(i), CPUCoresEffective: 16, CPURAM: 64000, DPHTotal: 0.3}})
	}
	tops := []int{10, 30}
	b, err := PNG(Curve(ranked, 30, tops), tops, "vcpu")
	if err != nil {
		t.Fatal(err)
	}
	checkPNGLabelled(t, b)
}

// checkPNGLabelled finds ink where the SVG has its words: the title above
// the frame, the x values and name below it, the vCPU values and name left
// of it, the RAM values and name right of it.
func checkPNGLabelled(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != plotW || img.Bounds().Dy() != plotH {
		t.Fatalf("PNG is %v", img.Bounds())
	}
	ink := func(r image.Rectangle) int {
		n := 0
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				if r, g, b, _ := img.At(x, y).RGBA(); r < 0x8000 || g < 0x8000 || b < 0x8000 {
					n++
				}
			}
		}
		return n
	}
	bottom, right := plotTop+plotInnerH, plotL+plotInnerW
	for _, part := range []struct {
		name string
		r    image.Rectangle
	}{
		{"title", image.Rect(0, 0, plotW, plotTop-2)},
		{"x tick values", image.Rect(plotL, bottom+6, right, bottom+22)},
		{"x axis name", image.Rect(plotL, bottom+26, right, plotH)},
		{"vCPU tick values", image.Rect(24, plotTop, plotL-6, bottom)},
		{"vCPU axis name", image.Rect(0, plotTop, 24, bottom)},
		{"RAM tick values", image.Rect(right+6, plotTop, plotW-24, bottom)},
		{"RAM axis name", image.Rect(plotW-24, plotTop, plotW, bottom)},
	} {
		if n := ink(part.r); n < 20 {
			t.Errorf("PNG plot: %s missing (%d dark pixels in %v)", part.name, n, part.r)
		}
	}
}
