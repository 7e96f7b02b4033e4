package gpu

// STUB: the signatures below are the package's contract; the bodies are being written.

import "errors"

var errTODO = errors.New("not implemented yet")

// Boards returns every board in the catalog, sorted by name.
func Boards() []*Board { return nil }

// Lookup finds a board by canonical name, alias or NVML name, case-insensitively.
func Lookup(name string) (*Board, error) { return nil, errTODO }

// ByPCIDeviceID returns the boards with that PCI device id ("0x233010DE", case-insensitive).
func ByPCIDeviceID(id string) []*Board { return nil }

// Profile returns the named MIG profile of b.
func (b *Board) Profile(name string) (*Profile, error) { return nil, errTODO }

// Validate checks a layout on b and returns all problems joined.
func (b *Board) Validate(l Layout) error { return errTODO }

// Place finds legal starts for a multiset of profiles, or explains why none exist.
func (b *Board) Place(counts map[string]int) (Layout, error) { return nil, errTODO }

// Enumerate returns all maximal layouts built from the named profiles (all profiles when empty).
func (b *Board) Enumerate(profiles []string) ([]Layout, error) { return nil, errTODO }
