package plan

import (
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// Nodes with GPUs of two boards, on the device-plugin path. NVIDIA's device plugin advertises
// every whole GPU of a node as nvidia.com/gpu and every MIG instance of a profile as
// nvidia.com/mig-<profile>, whatever the board, and hands a pod any free device of its resource
// on the node; so a replica sized for one board may be started on the other. The renderer
// reports every resource of a node whose devices are of more than one board while some carry
// replicas (internal/render, checkMixedBoards). The planner keeps to the rule that makes that
// impossible: a resource of a node carries replicas only if every device advertised under it
// there is of one board.
//
//   - useOf names the board of a unit's devices, so compatible refuses a resource of the node to
//     a second board as it refuses a second sharing setting;
//   - a whole GPU of one board goes to a mixed node only when every GPU there of another board
//     has MIG mode, and never as whole-GPU MPS (boardsFit): a GPU the plan leaves without
//     replicas is advertised too, as nvidia.com/gpu unless it is in MIG mode, and whole-GPU MPS
//     needs migStrategy none, under which every GPU of the node is a whole one;
//   - draft then puts the other boards' GPUs without replicas into MIG mode with no instances,
//     and drops instances without replicas whose profile another board's instances serve there
//     (hideOtherBoards), each with its reason.
//
// On the DRA path claims select the board (productName), and none of this applies.

// mixedBoardNodes lists the boards of each node of fleet with GPUs of more than one board.
func mixedBoardNodes(fleet []fleetGPU) map[string][]*gpu.Board {
	var out map[string][]*gpu.Board
	first := map[string]*gpu.Board{}
	for _, g := range fleet {
		n := g.ref.Node
		b, seen := first[n]
		switch {
		case !seen:
			first[n] = g.board
		case b != g.board:
			if out == nil {
				out = map[string][]*gpu.Board{}
			}
			if len(out[n]) == 0 {
				out[n] = []*gpu.Board{b}
			}
			if !slices.Contains(out[n], g.board) {
				out[n] = append(out[n], g.board)
			}
		}
	}
	return out
}

// hasMIG reports whether board b has a MIG mode.
func hasMIG(b *gpu.Board) bool { return b.MemorySlices > 0 && len(b.Profiles) > 0 }

// boardsFit is the node rule want's whole-GPU use breaks on a node with GPUs of more than one
// board, "" when none (or when the node has one board, or want no whole GPU).
func (p *planner) boardsFit(node string, want map[string]migUse) string {
	boards := p.boardsOn[node]
	if boards == nil {
		return ""
	}
	u, ok := want[wholeResource]
	if !ok {
		return ""
	}
	if u.kind == v1.SliceMPS {
		return fmt.Sprintf("node %s has GPUs of boards %s: whole-GPU MPS needs the device plugin's migStrategy none, "+
			"under which it advertises every GPU of the node as nvidia.com/gpu and hands a pod any of them, of either board",
			node, boardNames(boards))
	}
	if wb := p.wholeBoard(node); wb != "" && wb != u.board {
		return fmt.Sprintf("node %s keeps nvidia.com/gpu for its %s GPUs, the largest of its boards whose whole GPUs this plan's "+
			"tenants use, and this slice is a whole %s: the device plugin would advertise both boards' GPUs as that one "+
			"resource and hand a pod any of them (one board per resource and node)", node, wb, u.board)
	}
	for _, b := range boards {
		if b.Name != u.board && !hasMIG(b) {
			return fmt.Sprintf("node %s has %s GPUs, which have no MIG mode, so the device plugin advertises them as nvidia.com/gpu "+
				"beside its %s GPUs and hands a pod any of them (one board per resource and node)", node, b.Name, u.board)
		}
	}
	return ""
}

// wholeBoard is the board whose whole GPUs serve nvidia.com/gpu on node, a node with GPUs of
// more than one board: of its boards that some tenant's chosen candidate uses whole, the one with
// the most memory (a whole GPU of it holds what one of a smaller board does, and a model may fit
// it alone); "" when no tenant's choice is a whole GPU of its boards. The other boards' GPUs
// there serve by MIG or stay idle. Only a preference among sound placements: compatible keeps
// one board per resource and node whatever it says.
func (p *planner) wholeBoard(node string) string {
	boards := p.boardsOn[node]
	var best *gpu.Board
	for _, tn := range p.tenants {
		c := tn.choice
		if c == nil || !c.whole() || !slices.Contains(boards, c.board) {
			continue
		}
		if best == nil || c.board.MemoryMiB > best.MemoryMiB || c.board.MemoryMiB == best.MemoryMiB && c.board.Name < best.Name {
			best = c.board
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// boardRule is the node rule a slice of board want breaks on node, whose resource key (as in
// nodeUse) board have already serves.
func boardRule(node, key, have, want string) string {
	return fmt.Sprintf("node %s serves %s from its %s GPUs and this slice is on a %s: the device plugin would "+
		"advertise both boards' devices as that one resource and hand a pod any of them (one board per resource and node)",
		node, resourceName(key), have, want)
}

// resourceName is the device plugin's resource of a nodeUse key.
func resourceName(key string) string {
	if key == wholeResource {
		return "nvidia.com/gpu"
	}
	return "nvidia.com/mig-" + key
}

func boardNames(bs []*gpu.Board) string {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Name
	}
	return strings.Join(names, " and ")
}

// hideOtherBoards keeps, on each node of out with GPUs of more than one board, every resource
// that carries replicas to one board, as the renderer's check defines it: a GPU in MIG mode
// advertises its instances (nvidia.com/mig-<profile>), any other nvidia.com/gpu, with or without
// replicas. A GPU of another board than the one whose whole GPUs carry replicas (or a LoRA
// engine) and that carries none itself goes into MIG mode with no instances (compatible let
// whole GPUs there only when such GPUs have MIG; a burst GPU becomes idle when policy.allowedModes
// has no mig), and an instance without replicas whose profile another board's instances on the
// node serve is dropped. Nothing changes on the DRA path or on nodes of one board.
func (p *planner) hideOtherBoards(out *v1.Plan) {
	if p.perClaim {
		return
	}
	hideOtherBoardsIn(out, p.boardsOn, p.modes[v1.ModeMIG])
}

// hideOtherBoardsIn is hideOtherBoards on out's nodes boardsOn lists; migAllowed says whether
// policy.allowedModes has mig (a burst GPU put into MIG mode becomes idle when it has not).
func hideOtherBoardsIn(out *v1.Plan, boardsOn map[string][]*gpu.Board, migAllowed bool) {
	if boardsOn == nil {
		return
	}
	type key struct{ node, res string }
	users := map[key]string{} // the board whose devices carry replicas under the resource
	for _, g := range out.GPUs {
		if boardsOn[g.Node] == nil {
			continue
		}
		if g.Mode != v1.ModeMIG {
			if len(g.Replicas) > 0 || g.LoRAEngine != "" {
				users[key{g.Node, wholeResource}] = g.Board
			}
			continue
		}
		for _, in := range g.Instances {
			if len(in.Replicas) > 0 {
				users[key{g.Node, in.Profile}] = g.Board
			}
		}
	}
	for i := range out.GPUs {
		g := &out.GPUs[i]
		if boardsOn[g.Node] == nil {
			continue
		}
		if g.Mode != v1.ModeMIG {
			b, ok := users[key{g.Node, wholeResource}]
			if !ok || b == g.Board || len(g.Replicas) > 0 || g.LoRAEngine != "" {
				continue
			}
			board, err := gpu.Lookup(g.Board)
			if err != nil || !hasMIG(board) {
				continue // compatible placed no whole GPU of another board here
			}
			if g.Role == v1.RoleBurst && !migAllowed {
				g.Role = v1.RoleIdle
			}
			g.Mode, g.Instances = v1.ModeMIG, nil
			why := fmt.Sprintf("in MIG mode with no instances, so that the device plugin does not advertise it as nvidia.com/gpu "+
				"beside the node's %s GPUs, which carry replicas under that resource (it hands a pod any device of its resource on the node)", b)
			g.Reasons = append(g.Reasons, v1.NewReason(v1.ReasonIdle, "%s", why))
			continue
		}
		var kept []v1.PlanInstance
		var dropped []string
		for _, in := range g.Instances {
			if b, ok := users[key{g.Node, in.Profile}]; ok && b != g.Board && len(in.Replicas) == 0 {
				dropped = append(dropped, in.Ref().String())
				continue
			}
			kept = append(kept, in)
		}
		if len(dropped) > 0 {
			g.Instances = kept
			g.Reasons = append(g.Reasons, v1.NewReason(v1.ReasonIdle, "instance(s) %s left out: another board's instances of the "+
				"profile carry replicas on the node, and the device plugin hands a pod any device of its resource there",
				strings.Join(dropped, ", ")))
		}
	}
}

// planBoardsOn lists, per node of pl with GPUs of more than one board in the catalog, its
// boards (mixedBoardNodes over a plan's GPUs).
func planBoardsOn(pl *v1.Plan) map[string][]*gpu.Board {
	var fleet []fleetGPU
	for _, g := range pl.GPUs {
		b, err := gpu.Lookup(g.Board)
		if err != nil {
			continue
		}
		fleet = append(fleet, fleetGPU{ref: g.Ref(), board: b})
	}
	return mixedBoardNodes(fleet)
}

// engineBoards names, on the device-plugin path, the one board of each node with GPUs of more
// than one board whose idle GPUs may take a shared LoRA engine (an unshared whole GPU, so
// nvidia.com/gpu): the board whose whole GPUs already carry replicas there, or, when none do,
// the largest board of the node whose engine would leave every GPU of the other boards in MIG
// mode or able to go there (no replica, a board with MIG); "" when no board may. Every other
// board's GPUs are then hidden from nvidia.com/gpu as hideOtherBoards does.
func engineBoards(pl *v1.Plan, boardsOn map[string][]*gpu.Board) map[string]string {
	out := map[string]string{}
	for node, boards := range boardsOn {
		var gs []v1.PlanGPU
		for _, g := range pl.GPUs {
			if g.Node == node {
				gs = append(gs, g)
			}
		}
		user := ""
		for _, g := range gs {
			if g.Mode != v1.ModeMIG && (len(g.Replicas) > 0 || g.LoRAEngine != "") {
				user = g.Board
			}
		}
		if user != "" {
			out[node] = user
			continue
		}
		var best *gpu.Board
		for _, b := range boards {
			ok := true
			for _, g := range gs {
				if g.Board == b.Name || g.Mode == v1.ModeMIG {
					continue
				}
				ob, err := gpu.Lookup(g.Board)
				if err != nil || g.ReplicaCount() > 0 || !hasMIG(ob) {
					ok = false
				}
			}
			if ok && (best == nil || b.MemoryMiB > best.MemoryMiB) {
				best = b
			}
		}
		if best != nil {
			out[node] = best.Name
		} else {
			out[node] = ""
		}
	}
	return out
}
