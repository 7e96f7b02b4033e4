package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Files a model directory may hold.
const (
	ConfigFile      = "config.json"
	SafetensorsFile = "model.safetensors"
	IndexFile       = "model.safetensors.index.json"
	maxIndexBytes   = 64 << 20 // index files list tensor names: a few MiB for the largest models
)

// FileSummary is one safetensors file's header, summed.
type FileSummary struct {
	Name        string `json:"name"`
	HeaderBytes int64  `json:"headerBytes"`
	DataBytes   int64  `json:"dataBytes"`
	Tensors     int    `json:"tensors"`
}

// Checkpoint is what a model directory's safetensors headers say.
type Checkpoint struct {
	Files   []FileSummary `json:"files"`
	Tensors int           `json:"tensors"`
	// Bytes is the sum of all tensor data: what loading the checkpoint puts on the GPU.
	Bytes int64 `json:"bytes"`
	// Params counts weights: packed int4 tensors (qweight, weight_packed) count 32/bits weights per
	// I32; quantization scales, zero points, g_idx and shapes are not weights.
	Params  int64       `json:"params"`
	ByDType []DTypeStat `json:"byDtype"`
	// IndexTotalSize is model.safetensors.index.json's metadata.total_size, 0 without an index.
	IndexTotalSize int64 `json:"indexTotalSize,omitempty"`
}

// Model is an architecture with, when read from a directory, its checkpoint.
type Model struct {
	Arch       Arch        `json:"arch"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// QuantBits is the checkpoint's quantization_config.bits, 0 when none.
	QuantBits int      `json:"quantBits,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

// FromArch wraps a catalog architecture: weights come from the formula.
func FromArch(a Arch) Model { return Model{Arch: a} }

// LoadDir reads a Hugging Face model directory through fsys: config.json (required), then the
// safetensors headers — sharded through model.safetensors.index.json, or model.safetensors, or
// else every *.safetensors file at the top. Without safetensors the model still loads and its
// weights come from the formula (a note says so). It reads headers only, never tensor data.
//
// It trusts nothing in the directory: every file is checked with fs.Stat before it is opened
// and must be a regular file (a FIFO would block, a device never end) within its size limit;
// shard files (model-00001-of-00004.safetensors) need the index, so that a missing shard is an
// error rather than a model sized at a fraction; byte and weight totals are checked against
// overflow. Errors name the file and never quote its content. Give it an fs.FS that cannot
// leave the directory (os.Root's FS), so that symbolic links out of it are refused.
func LoadDir(fsys fs.FS) (Model, error) {
	cfg, err := readSmall(fsys, ConfigFile, MaxConfigBytes)
	if err != nil {
		return Model{}, err
	}
	a, notes, err := ParseConfig(cfg)
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	m := Model{Arch: a, Notes: notes, QuantBits: quantBits(cfg)}
	files, total, err := shardList(fsys)
	if err != nil {
		return Model{}, err
	}
	if len(files) == 0 {
		m.Notes = append(m.Notes, "no safetensors files: weight bytes come from the formula")
		return m, nil
	}
	ck, more, err := readCheckpoint(fsys, files, m.QuantBits)
	if err != nil {
		return Model{}, err
	}
	m.Notes = append(m.Notes, more...)
	if total.present {
		ck.IndexTotalSize = total.size
		if total.size != ck.Bytes {
			m.Notes = append(m.Notes, fmt.Sprintf("%s: metadata.total_size %d disagrees with the %d tensor bytes the headers describe; using the headers",
				IndexFile, total.size, ck.Bytes))
		}
	}
	if total.weightMap != nil {
		if err := checkWeightMap(total.weightMap, ck.names, &m.Notes); err != nil {
			return Model{}, err
		}
	}
	m.Checkpoint = &ck.Checkpoint
	return m, nil
}

// quantBits reads quantization_config.bits (top level or text_config); 0 when absent.
func quantBits(cfg []byte) int {
	var c struct {
		Q struct {
			Bits int `json:"bits"`
		} `json:"quantization_config"`
	}
	if json.Unmarshal(cfg, &c) != nil {
		return 0
	}
	return c.Q.Bits
}

// statRegular checks, without opening it, that name is a regular file and returns its size.
func statRegular(fsys fs.FS, name string) (int64, error) {
	st, err := fs.Stat(fsys, name)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	if m := st.Mode(); !m.IsRegular() {
		return 0, fmt.Errorf("read %s: %s, not a regular file", name, FileKind(m))
	}
	return st.Size(), nil
}

// FileKind says what a non-regular file is ("is a directory", "is a named pipe (FIFO)", …), for
// the messages of every reader that accepts regular files only.
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "is a directory"
	case m&fs.ModeSymlink != 0:
		return "is a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "is a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "is a socket"
	case m&fs.ModeDevice != 0:
		return "is a device"
	}
	return "has mode " + m.String()
}

// readSmall reads a whole regular file of at most limit bytes, checking the size before reading.
func readSmall(fsys fs.FS, name string, limit int64) ([]byte, error) {
	size, err := statRegular(fsys, name)
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, fmt.Errorf("read %s: %d bytes, larger than the %d-byte limit", name, size, limit)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("read %s: larger than the %d-byte limit", name, limit)
	}
	return b, nil
}

// indexInfo is what model.safetensors.index.json adds.
type indexInfo struct {
	present   bool
	size      int64
	weightMap map[string]string
}

// shardList names the safetensors files to read, in order.
func shardList(fsys fs.FS) ([]string, indexInfo, error) {
	b, err := readSmall(fsys, IndexFile, maxIndexBytes)
	switch {
	case err == nil:
		return parseIndex(b)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, indexInfo{}, err
	}
	if _, err := fs.Stat(fsys, SafetensorsFile); err == nil {
		return []string{SafetensorsFile}, indexInfo{}, nil
	}
	files, err := fs.Glob(fsys, "*.safetensors")
	if err != nil {
		return nil, indexInfo{}, fmt.Errorf("list *.safetensors: %w", err)
	}
	for _, f := range files {
		if shardRE.MatchString(f) {
			return nil, indexInfo{}, fmt.Errorf("%s is a shard of a sharded checkpoint, but %s is missing: without it a missing shard would go unnoticed and the model would be sized too small",
				f, IndexFile)
		}
	}
	return files, indexInfo{}, nil
}

// shardRE matches the names Hugging Face gives the shards of a checkpoint.
var shardRE = regexp.MustCompile(`-[0-9]{5}-of-[0-9]{5}\.safetensors$`)

func parseIndex(b []byte) ([]string, indexInfo, error) {
	var idx struct {
		Metadata struct {
			TotalSize *json.Number `json:"total_size"`
		} `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, indexInfo{}, fmt.Errorf("parse %s: %w", IndexFile, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, indexInfo{}, fmt.Errorf("parse %s: weight_map is missing or empty", IndexFile)
	}
	info := indexInfo{weightMap: idx.WeightMap}
	if idx.Metadata.TotalSize != nil {
		f, err := idx.Metadata.TotalSize.Float64()
		if err != nil || f < 0 || f > 1<<62 {
			return nil, indexInfo{}, fmt.Errorf("parse %s: metadata.total_size %s is not a byte count", IndexFile, *idx.Metadata.TotalSize)
		}
		info.present, info.size = true, int64(f)
	}
	seen := map[string]bool{}
	var files []string
	// In tensor order, so that the same index names the same bad entry every time.
	for _, tensor := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		file := idx.WeightMap[tensor]
		if !fs.ValidPath(file) || !strings.HasSuffix(file, ".safetensors") {
			return nil, indexInfo{}, fmt.Errorf("parse %s: weight_map[%q]: %q is not a .safetensors file in the directory", IndexFile, tensor, file)
		}
		if !seen[file] {
			seen[file] = true
			files = append(files, file)
		}
	}
	sort.Strings(files)
	return files, info, nil
}

// checkpointRead is a Checkpoint plus the tensor→file map for cross-checks.
type checkpointRead struct {
	Checkpoint
	names map[string]string
}

// readCheckpoint reads every file's header and sums them.
func readCheckpoint(fsys fs.FS, files []string, quantBits int) (checkpointRead, []string, error) {
	ck := checkpointRead{names: map[string]string{}}
	var all []Tensor
	var errs []error
	for _, name := range files {
		h, err := readHeaderFile(fsys, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, t := range h.Tensors {
			if prev, dup := ck.names[t.Name]; dup {
				errs = append(errs, fmt.Errorf("%s: tensor %q is also in %s", name, t.Name, prev))
				continue
			}
			ck.names[t.Name] = name
			var ok1, ok2 bool
			ck.Bytes, ok1 = addChecked(ck.Bytes, t.Bytes())
			ck.Params, ok2 = addChecked(ck.Params, weightCount(t, quantBits))
			if !ok1 || !ok2 {
				return checkpointRead{}, nil, fmt.Errorf("%s: tensor %q: the checkpoint's byte or weight total overflows", name, t.Name)
			}
			all = append(all, t)
		}
		ck.Files = append(ck.Files, FileSummary{Name: name, HeaderBytes: h.HeaderBytes, DataBytes: h.DataBytes, Tensors: len(h.Tensors)})
	}
	if len(errs) > 0 {
		return checkpointRead{}, nil, joinCapped(errs)
	}
	ck.Tensors = len(all)
	ck.ByDType = byDType(all)
	var notes []string
	if _, mtp := ck.names["model.layers.61.eh_proj.weight"]; mtp {
		notes = append(notes, "the checkpoint includes a multi-token-prediction module that vLLM loads only for speculative decoding")
	}
	return ck, notes, nil
}

// readHeaderFile opens one safetensors file, after checking that it is a regular file, and reads
// its header.
func readHeaderFile(fsys fs.FS, name string) (*Header, error) {
	if _, err := statRegular(fsys, name); err != nil {
		return nil, err
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("read %s: is a directory", name)
	}
	ra, ok := f.(io.ReaderAt)
	if !ok {
		ra = &sequentialReaderAt{r: f}
	}
	h, err := ReadHeader(ra, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return h, nil
}

// sequentialReaderAt serves ReadAt calls at non-decreasing offsets from a plain reader, which is
// all ReadHeader needs from files that do not implement io.ReaderAt.
type sequentialReaderAt struct {
	r   io.Reader
	off int64
}

func (s *sequentialReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < s.off {
		return 0, fmt.Errorf("read at %d: file only reads forward (at %d)", off, s.off)
	}
	if _, err := io.CopyN(io.Discard, s.r, off-s.off); err != nil {
		return 0, err
	}
	n, err := io.ReadFull(s.r, p)
	s.off = off + int64(n)
	return n, err
}

// weightCount is how many model weights a tensor holds (see Checkpoint.Params).
func weightCount(t Tensor, quantBits int) int64 {
	name := t.Name
	for _, suffix := range []string{".qzeros", ".scales", ".g_idx", "_scale", "_scale_inv", ".weight_shape", "_zero_point", ".input_scale"} {
		if strings.HasSuffix(name, suffix) {
			return 0
		}
	}
	if (strings.HasSuffix(name, ".qweight") || strings.HasSuffix(name, ".weight_packed")) && (t.DType == "I32" || t.DType == "U32") {
		if quantBits <= 0 || quantBits > 32 {
			quantBits = 4
		}
		n, ok := mulChecked(t.Elements(), int64(32/quantBits))
		if !ok {
			return -1 // addChecked reports it
		}
		return n
	}
	return t.Elements()
}

// addChecked returns a + b for non-negative a and b, and false when the sum overflows or either
// is negative.
func addChecked(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// mulChecked returns a × b for non-negative a and b, and false when the product overflows.
func mulChecked(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || (a != 0 && b > math.MaxInt64/a) {
		return 0, false
	}
	return a * b, true
}

// checkWeightMap compares the index's weight_map with the headers: a listed tensor missing from
// its file is an error; tensors the map does not list are a note.
func checkWeightMap(wm map[string]string, found map[string]string, notes *[]string) error {
	var errs []error
	names := make([]string, 0, len(wm))
	for t := range wm {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		if got, ok := found[t]; !ok || got != wm[t] {
			errs = append(errs, fmt.Errorf("%s: weight_map puts tensor %q in %s, whose header does not have it", IndexFile, t, wm[t]))
		}
	}
	if len(errs) > 0 {
		return joinCapped(errs)
	}
	if extra := len(found) - len(wm); extra > 0 {
		*notes = append(*notes, fmt.Sprintf("%d tensors in the shards are not listed in %s's weight_map", extra, IndexFile))
	}
	return nil
}
