package render

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"math"

	v1 "gpupool.dev/gpupool/api/v1"
)

// SVG geometry.
const (
	svgRow    = 30  // height of one GPU row
	svgLabel  = 300 // width of the label column
	svgBar    = 560 // width of the memory bar
	svgMargin = 10
)

// TenantColor is the tenant's stable fill colour in the pool map, "#rrggbb": hue from the FNV-1a
// hash of its name, saturation 65%, lightness 62% (hex rather than hsl() so every SVG 1.1
// renderer reads it).
func TenantColor(tenant string) string {
	h := fnv.New32a()
	h.Write([]byte(tenant))
	r, g, b := hslToRGB(float64(h.Sum32()%360), 0.65, 0.62)
	return fmt.Sprintf("#%02x%02x%02x", r, g, b)
}

// hslToRGB converts a colour from HSL (hue in degrees) to 8-bit RGB (the CSS Color 3 formula).
func hslToRGB(hue, sat, light float64) (r, g, b uint8) {
	c := (1 - math.Abs(2*light-1)) * sat
	x := c * (1 - math.Abs(math.Mod(hue/60, 2)-1))
	var rf, gf, bf float64
	switch {
	case hue < 60:
		rf, gf = c, x
	case hue < 120:
		rf, gf = x, c
	case hue < 180:
		gf, bf = c, x
	case hue < 240:
		gf, bf = x, c
	case hue < 300:
		rf, bf = x, c
	default:
		rf, bf = c, x
	}
	m := light - c/2
	to8 := func(v float64) uint8 { return uint8(math.Round((v + m) * 255)) }
	return to8(rf), to8(gf), to8(bf)
}

type svgWriter struct{ b bytes.Buffer }

func (w *svgWriter) text(x, y int, anchor, s string) {
	fmt.Fprintf(&w.b, `<text x="%d" y="%d" text-anchor="%s">`, x, y, anchor)
	_ = xml.EscapeText(&w.b, []byte(s))
	w.b.WriteString("</text>\n")
}

func (w *svgWriter) rect(x, y, wd, ht int, fill, title string) {
	fmt.Fprintf(&w.b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#333">`, x, y, wd, ht, fill)
	if title != "" {
		w.b.WriteString("<title>")
		_ = xml.EscapeText(&w.b, []byte(title))
		w.b.WriteString("</title>")
	}
	w.b.WriteString("</rect>\n")
}

// poolMapSVG draws every GPU of the plan as a row of its memory: MIG GPUs as their memory
// slices with each instance over the slices it occupies, other GPUs as one bar; each replica in
// its tenant's colour, shared slices split between their replicas.
func poolMapSVG(m *model) []byte {
	var rows int
	for _, n := range m.nodes {
		rows += len(n.gpus)
	}
	_, tenants := m.replicasByTenant()
	height := svgMargin*2 + (rows+1)*svgRow + (len(tenants)+1)*20
	width := svgMargin*2 + svgLabel + svgBar
	w := &svgWriter{}
	fmt.Fprintf(&w.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	w.b.WriteString("<title>")
	_ = xml.EscapeText(&w.b, []byte("gpupool pool map: plan "+m.plan.Metadata.Name))
	w.b.WriteString("</title>\n")
	w.text(svgMargin, svgMargin+14, "start", "plan "+m.plan.Metadata.Name+" for pool "+m.plan.Pool)
	y := svgMargin + svgRow
	for _, n := range m.nodes {
		for _, g := range n.gpus {
			p := g.plan
			w.text(svgMargin, y+19, "start", fmt.Sprintf("%s/%d %s %s %s", p.Node, p.Index, p.Board, p.Role, p.Mode))
			drawGPU(w, g, svgMargin+svgLabel, y+3)
			y += svgRow
		}
	}
	y += 10
	for _, t := range tenants {
		w.rect(svgMargin, y, 14, 14, TenantColor(t), "")
		w.text(svgMargin+20, y+12, "start", t)
		y += 20
	}
	w.b.WriteString("</svg>\n")
	return w.b.Bytes()
}

func drawGPU(w *svgWriter, g *gpuModel, x, y int) {
	h := svgRow - 6
	if g.plan.Mode != v1.ModeMIG || g.board.MemorySlices == 0 {
		w.rect(x, y, svgBar, h, "#eee", "")
		for _, d := range g.devices {
			drawDevice(w, d, x, y, svgBar, h)
		}
		return
	}
	slot := svgBar / g.board.MemorySlices
	for s := 0; s < g.board.MemorySlices; s++ {
		w.rect(x+s*slot, y, slot, h, "#eee", fmt.Sprintf("memory slice %d", s))
	}
	for _, d := range g.devices {
		p, err := g.board.Profile(d.instance.Profile)
		if err != nil {
			continue
		}
		drawDevice(w, d, x+d.instance.Start*slot, y, p.MemorySlices*slot, h)
	}
}

// drawDevice fills a device's span with its replicas side by side and labels it.
func drawDevice(w *svgWriter, d *device, x, y, wd, h int) {
	label := string(d.kind)
	if d.instance != nil {
		label = d.instance.Ref().String()
		if d.kind != v1.SliceMIG {
			label += " " + string(d.kind)
		}
	}
	if len(d.replicas) == 0 {
		if d.instance != nil {
			w.rect(x, y, wd, h, "#ccc", label+": no replicas")
			w.text(x+wd/2, y+16, "middle", label)
		}
		return
	}
	part := wd / len(d.replicas)
	for i, r := range d.replicas {
		title := fmt.Sprintf("%s: %s replica %d", label, r.Tenant, r.Index)
		if r.Limits.Memory > 0 {
			title += ", memory " + r.Limits.Memory.String()
		}
		if r.Limits.SMPercent > 0 {
			title += fmt.Sprintf(", %d%% SMs", r.Limits.SMPercent)
		}
		w.rect(x+i*part, y, part, h, TenantColor(r.Tenant), title)
		w.text(x+i*part+part/2, y+16, "middle", fmt.Sprintf("%s/%d", r.Tenant, r.Index))
	}
}

func svgArtifacts(m *model) ([]Artifact, error) {
	return []Artifact{{Path: "pool-map.svg", Data: poolMapSVG(m)}}, nil
}
