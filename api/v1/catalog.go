package v1

import (
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
)

// Catalog answers the questions validation asks about hardware and models. Builtin answers
// them from the gpu and llm catalogs; tests and tools may pass their own to a Validator. MIG
// layouts are checked with (*gpu.Board).Validate on the board Catalog.Board returns.
type Catalog interface {
	// Board resolves a board name (canonical, alias or NVML name) or returns an error.
	Board(name string) (*gpu.Board, error)
	// BoardNames returns the canonical board names, sorted, for error messages.
	BoardNames() []string
	// Model resolves a model catalog name or returns an error.
	Model(name string) (llm.Arch, error)
	// ModelNames returns the model catalog names, sorted, for error messages.
	ModelNames() []string
}

// Builtin is the Catalog backed by the internal/gpu and internal/llm catalogs.
var Builtin Catalog = builtinCatalog{}

type builtinCatalog struct{}

func (builtinCatalog) Board(name string) (*gpu.Board, error) { return gpu.Lookup(name) }

func (builtinCatalog) BoardNames() []string {
	boards := gpu.Boards()
	names := make([]string, len(boards))
	for i, b := range boards {
		names[i] = b.Name
	}
	return names
}

func (builtinCatalog) Model(name string) (llm.Arch, error) { return llm.Lookup(name) }

func (builtinCatalog) ModelNames() []string {
	archs := llm.Catalog()
	names := make([]string, len(archs))
	for i, a := range archs {
		names[i] = a.Name
	}
	return names
}
