package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnknownBoard is wrapped by Lookup's error when no board matches.
var ErrUnknownBoard = errors.New("unknown board")

// ErrUnknownProfile matches (errors.Is) every *ProfileError.
var ErrUnknownProfile = errors.New("unknown profile")

// ProfileError says that a profile name does not exist on a board, and lists the valid ones.
type ProfileError struct {
	Board   string
	Profile string
	Valid   []string
}

func (e *ProfileError) Error() string {
	return fmt.Sprintf("profile %q does not exist on %s (valid: %s)", e.Profile, e.Board, strings.Join(e.Valid, ", "))
}

// Is reports whether target is ErrUnknownProfile.
func (e *ProfileError) Is(target error) bool { return target == ErrUnknownProfile }

// catalog holds every board, sorted by name, and the lookup indexes. Built once; never mutated.
var catalog = buildCatalog()

type catalogIndex struct {
	boards []*Board
	byName map[string]*Board // normalized canonical, alias and NVML names
	byPCI  map[string][]*Board
	// clashes lists names that two boards claim; a test keeps it empty.
	clashes []string
}

func buildCatalog() *catalogIndex {
	boards := []*Board{
		a100SXM4_40GB(), a100PCIe40GB(), a100SXM4_80GB(), a100PCIe80GB(), a30_24GB(),
		h100SXM5_80GB(), h100PCIe80GB(), h100NVL94GB(), h100x96GB(), h20x96GB(), gh200x144GB(), h200x141GB(),
		b200x180GB(), gb200x186GB(), gb200x189GB(), b300x269GB(), gb300x278GB(), rtxPro6000(), rtxPro5000(), rtxPro4500(),
	}
	slices.SortFunc(boards, func(a, b *Board) int { return strings.Compare(a.Name, b.Name) })
	c := &catalogIndex{boards: boards, byName: map[string]*Board{}, byPCI: map[string][]*Board{}}
	for _, b := range boards {
		names := append([]string{b.Name}, b.Aliases...)
		for _, n := range b.NVMLNames {
			names = append(names, n, strings.TrimPrefix(normalizeName(n), "nvidia-"))
		}
		for _, n := range names {
			k := normalizeName(n)
			if prev, ok := c.byName[k]; ok && prev != b {
				c.clashes = append(c.clashes, fmt.Sprintf("%q: %s and %s", n, prev.Name, b.Name))
				continue
			}
			c.byName[k] = b
		}
		for _, id := range b.PCIDeviceIDs {
			k := normalizePCI(id)
			c.byPCI[k] = append(c.byPCI[k], b)
		}
	}
	return c
}

// normalizeName lower-cases s and turns every run of spaces, underscores and hyphens into one
// hyphen, so "NVIDIA H100 PCIe", "nvidia_h100-pcie" and "nvidia-h100-pcie" are the same key.
func normalizeName(s string) string {
	var sb strings.Builder
	sep := false
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		if r == ' ' || r == '_' || r == '-' || r == '\t' {
			sep = true
			continue
		}
		if sep && sb.Len() > 0 {
			sb.WriteByte('-')
		}
		sep = false
		sb.WriteRune(r)
	}
	return sb.String()
}

// normalizePCI turns "0x233010DE", "233010de", "0x2330", "2330" and "10de:2330" into "233010de".
// A 4-digit id is a device id of vendor 10de (NVIDIA).
func normalizePCI(id string) string {
	s := strings.ToLower(strings.TrimSpace(id))
	if v, d, ok := strings.Cut(s, ":"); ok {
		s = strings.TrimPrefix(d, "0x") + strings.TrimPrefix(v, "0x")
	}
	s = strings.TrimPrefix(s, "0x")
	if len(s) == 4 {
		s += "10de"
	}
	return s
}

// Boards returns every board in the catalog, sorted by name. The boards are shared: callers must
// not mutate them.
func Boards() []*Board { return slices.Clone(catalog.boards) }

// Lookup finds a board by canonical name, alias or NVML name ("H100-SXM5-80GB", "H100",
// "NVIDIA H100 80GB HBM3"), case-insensitively; spaces, underscores and hyphens are
// interchangeable and the "NVIDIA " prefix of NVML names is optional. The error wraps
// ErrUnknownBoard and lists the canonical names.
func Lookup(name string) (*Board, error) {
	if b, ok := catalog.byName[normalizeName(name)]; ok {
		return b, nil
	}
	names := make([]string, len(catalog.boards))
	for i, b := range catalog.boards {
		names[i] = b.Name
	}
	return nil, fmt.Errorf("lookup board %q: %w (valid: %s)", name, ErrUnknownBoard, strings.Join(names, ", "))
}

// ByPCIDeviceID returns the boards with that PCI device id. It accepts mig-parted's device-filter
// form "0x233010DE" case-insensitively, and also "0x2330", "2330" and "10de:2330". nil when none.
func ByPCIDeviceID(id string) []*Board {
	return slices.Clone(catalog.byPCI[normalizePCI(id)])
}

// MIGCapable reports whether the board supports MIG.
func (b *Board) MIGCapable() bool { return b.MemorySlices > 0 && len(b.Profiles) > 0 }

// MemoryGiB is the board's total memory in GiB.
func (b *Board) MemoryGiB() float64 { return float64(b.MemoryMiB) / 1024 }

// IsUnverified reports whether the named board field (its JSON name, e.g. "tdpWatts") is unverified.
func (b *Board) IsUnverified(field string) bool { return slices.Contains(b.Unverified, field) }

// IsUnverified reports whether the named profile field (its JSON name, e.g. "sms") is unverified.
func (p *Profile) IsUnverified(field string) bool { return slices.Contains(p.Unverified, field) }

// Profile returns the named MIG profile of b, matching case-insensitively. The error is a
// *ProfileError listing the valid names.
func (b *Board) Profile(name string) (*Profile, error) {
	if p := b.profile(name); p != nil {
		return p, nil
	}
	return nil, &ProfileError{Board: b.Name, Profile: name, Valid: b.ProfileNames()}
}

// profile is Profile without the error: nil when the name is unknown.
func (b *Board) profile(name string) *Profile {
	for i := range b.Profiles {
		if b.Profiles[i].Name == name {
			return &b.Profiles[i]
		}
	}
	for i := range b.Profiles {
		if strings.EqualFold(b.Profiles[i].Name, name) {
			return &b.Profiles[i]
		}
	}
	return nil
}

// ProfileByID returns the profile with that NVML GPU-instance profile id. Profiles whose id is
// unknown (-1) are never returned.
func (b *Board) ProfileByID(id int) (*Profile, error) {
	for i := range b.Profiles {
		if id >= 0 && b.Profiles[i].ID == id {
			return &b.Profiles[i], nil
		}
	}
	return nil, fmt.Errorf("find profile id %d on %s: no such profile", id, b.Name)
}

// ProfileNames returns the board's profile names in catalog order (smallest shape first).
func (b *Board) ProfileNames() []string {
	names := make([]string, len(b.Profiles))
	for i := range b.Profiles {
		names[i] = b.Profiles[i].Name
	}
	return names
}
