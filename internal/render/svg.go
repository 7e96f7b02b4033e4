package render

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"slices"
	"unicode/utf8"

	v1 "gpupool.dev/gpupool/api/v1"
)

// SVG geometry.
const (
	svgRow    = 30  // height of one GPU row
	svgLabel  = 300 // width of the label column
	svgBar    = 560 // width of the memory bar
	svgMargin = 10
)

// tenantPalette is Kelly's colours of maximum contrast (K. L. Kelly, "Twenty-two colors of
// maximum contrast", Color Engineering 3(6), 1965), in his order, without white and black (the
// map's background and text) and the two darkest browns and olive (black labels on them are hard
// to read).
var tenantPalette = []string{
	"#f3c300", "#875692", "#f38400", "#a1caf1", "#be0032", "#c2b280", "#848482", "#008856", "#e68fac",
	"#0067a5", "#f99379", "#604e97", "#f6a600", "#b3446c", "#dcd300", "#882d17", "#8db600", "#e25822",
}

// TenantColors gives each tenant of a pool map its fill colour, "#rrggbb": tenants in name order
// take Kelly's colours of maximum contrast in turn, so that tenants of one group (chat-a, chat-b)
// are told apart at a glance; past 18 tenants the colours repeat and the legend and each cell's
// tooltip tell them apart. A tenant keeps its colour as long as the set of tenant names does not
// change.
func TenantColors(names []string) map[string]string {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	out := make(map[string]string, len(sorted))
	for i, n := range sorted {
		out[n] = tenantPalette[i%len(tenantPalette)]
	}
	return out
}

type svgWriter struct{ b bytes.Buffer }

func (w *svgWriter) text(x, y int, anchor, s string) {
	fmt.Fprintf(&w.b, `<text x="%d" y="%d" text-anchor="%s">`, x, y, anchor)
	_ = xml.EscapeText(&w.b, []byte(s))
	w.b.WriteString("</text>\n")
}

// Estimated advance per character of the sans-serif labels, in pixels per point of font size
// (0.6 em covers lower-case letters, digits and punctuation of common fonts).
const svgCharEm = 0.6

// fitLabel fits a label into a cell wd pixels wide: at the normal 12 px when it fits, else at
// 9 px, else cut with "…" at 9 px; "" when not even two characters fit (the cell's title still
// names it). It returns the text and its font size.
func fitLabel(s string, wd int) (string, int) {
	room := float64(wd - 4) // 2 px on each side
	n := utf8.RuneCountInString(s)
	for _, size := range []int{12, 9} {
		if float64(n)*svgCharEm*float64(size) <= room {
			return s, size
		}
	}
	fit := int(room/(svgCharEm*9)) - 1 // one for the ellipsis
	if fit < 2 {
		return "", 9
	}
	return string([]rune(s)[:fit]) + "…", 9
}

// cellText writes a label centred in a cell wd pixels wide, fitted by fitLabel.
func (w *svgWriter) cellText(x, y, wd int, s string) {
	text, size := fitLabel(s, wd)
	if text == "" {
		return
	}
	if size == 12 {
		w.text(x+wd/2, y, "middle", text)
		return
	}
	fmt.Fprintf(&w.b, `<text x="%d" y="%d" text-anchor="middle" font-size="%d">`, x+wd/2, y, size)
	_ = xml.EscapeText(&w.b, []byte(text))
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
	colors := TenantColors(tenants)
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
			drawGPU(w, g, svgMargin+svgLabel, y+3, colors)
			y += svgRow
		}
	}
	y += 10
	for _, t := range tenants {
		w.rect(svgMargin, y, 14, 14, colors[t], "")
		w.text(svgMargin+20, y+12, "start", t)
		y += 20
	}
	w.b.WriteString("</svg>\n")
	return w.b.Bytes()
}

func drawGPU(w *svgWriter, g *gpuModel, x, y int, colors map[string]string) {
	h := svgRow - 6
	if g.plan.Mode != v1.ModeMIG || g.board.MemorySlices == 0 {
		w.rect(x, y, svgBar, h, "#eee", "")
		for _, d := range g.devices {
			drawDevice(w, d, x, y, svgBar, h, colors)
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
		drawDevice(w, d, x+d.instance.Start*slot, y, p.MemorySlices*slot, h, colors)
	}
}

// drawDevice fills a device's span with its replicas side by side and labels it.
func drawDevice(w *svgWriter, d *device, x, y, wd, h int, colors map[string]string) {
	label := string(d.kind)
	if d.instance != nil {
		label = d.instance.Ref().String()
		if d.kind != v1.SliceMIG {
			label += " " + string(d.kind)
		}
	}
	if d.loraEngine != "" {
		w.rect(x, y, wd, h, "#9ecae1", label+": shared LoRA engine "+d.loraEngine)
		w.cellText(x, y+16, wd, "lora:"+d.loraEngine)
		return
	}
	if len(d.replicas) == 0 {
		if d.instance != nil {
			w.rect(x, y, wd, h, "#ccc", label+": no replicas")
			w.cellText(x, y+16, wd, label)
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
		w.rect(x+i*part, y, part, h, colors[r.Tenant], title)
		w.cellText(x+i*part, y+16, part, fmt.Sprintf("%s/%d", r.Tenant, r.Index))
	}
}

func svgArtifacts(m *model) ([]Artifact, error) {
	return []Artifact{{Path: "pool-map.svg", Data: poolMapSVG(m)}}, nil
}
