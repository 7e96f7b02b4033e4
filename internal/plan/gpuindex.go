package plan

// gpuIndex lists the GPUs of one packing (planner.gpus) by node and by board, each list in
// fleet order. The rescue's steps read one node's or one board's GPUs once per short tenant
// and candidate (resetNodeUses, placedOf); walking every GPU of the fleet for them made the
// rescue of a short fleet quadratic in its size.
type gpuIndex struct {
	of      []*gpuPlan // the slice it lists: planner.gpus when it was built
	byNode  map[string][]*gpuPlan
	byBoard map[string][]*gpuPlan
}

// gpuIdx is the index of p.gpus, built again when p.gpus is another slice (a packing makes a
// new one, a snapshot's restore puts an old one back). The GPUs' nodes and boards never change,
// and a packing only changes what each GPU holds, so the lists stay right for the slice.
func (p *planner) gpuIdx() *gpuIndex {
	if x := p.gidx; x != nil && sameSlice(x.of, p.gpus) {
		return x
	}
	x := &gpuIndex{of: p.gpus, byNode: map[string][]*gpuPlan{}, byBoard: map[string][]*gpuPlan{}}
	for _, g := range p.gpus {
		x.byNode[g.fg.ref.Node] = append(x.byNode[g.fg.ref.Node], g)
		x.byBoard[g.fg.board.Name] = append(x.byBoard[g.fg.board.Name], g)
	}
	p.gidx = x
	return x
}

// sameSlice reports whether a and b are the same slice: the same length and first element.
func sameSlice(a, b []*gpuPlan) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
